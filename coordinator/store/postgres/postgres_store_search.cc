// PostgresStore: the indexes of declared search attributes (a B-tree per
// field on its text and the id, so that ?input.F=V comes newest first from
// the index; the GIN index finds every match but cannot order them).
#include <libpq-fe.h>

#include <algorithm>

#include "coordinator/store/postgres/postgres_connection.h"
#include "coordinator/store/postgres/postgres_store.h"
#include "sagas/search_attributes.h"
#include "util/log.h"

namespace sagad {

namespace {

// An index build may take as long as the table is big.
constexpr std::chrono::milliseconds kIndexBuildDeadline(30 * 60 * 1000);

// The indexed expression of declared field `name`, exactly as ListStatement
// writes its condition (the planner matches them as text). `name` is a
// checked field name (sagas/search_attributes.h): safe as a literal.
std::string FieldExpression(const std::string& name) {
  const bool metadata = name.rfind(kMetadataAttributePrefix, 0) == 0;
  const std::string field = metadata ? name.substr(sizeof kMetadataAttributePrefix - 1) : name;
  return "(((snapshot::jsonb) -> '" + std::string(metadata ? "metadata" : "input") + "') ->> '" +
         field + "')";
}

}  // namespace

std::string PostgresStore::SearchIndexName(const std::string& name) {
  std::string out = "sagad_search_";
  for (char c : name) out += c == '.' || c == '-' ? '_' : c;
  return out;
}

std::string PostgresStore::SearchCondition(const InstanceFilter& f) {
  const std::string name = (f.in_metadata ? kMetadataAttributePrefix : "") + f.input_field;
  // A JSON null's ->> is SQL NULL: no index answers "null" (the exact
  // condition does); any other value's ->> is the text the condition
  // compares.
  if (f.input_value == "null" || f.input_value.rfind('{', 0) == 0 ||
      f.input_value.rfind('[', 0) == 0 || !ValidateSearchAttributes({name}, "", true).ok())
    return "";
  return FieldExpression(name) + " =";
}

void PostgresStore::DeclareSearchAttributesAsync(const std::string& saga,
                                                 const std::vector<std::string>& fields,
                                                 std::function<void(Status)> done) {
  (void)saga;  // one index per field serves every saga
  MutexLock l(close_mu_);
  if (closing_) return done(Unavailable("the store is closing"));
  index_builds_.push_back({fields, std::move(done)});
  if (!indexer_.joinable()) indexer_ = std::thread([this] { IndexLoop(); });
  close_cv_.NotifyAll();
}

void PostgresStore::IndexLoop() {
  while (true) {
    std::deque<IndexBuild> builds;
    {
      MutexLock l(close_mu_);
      close_cv_.Wait(close_mu_,
                     [&]() REQUIRES(close_mu_) { return closing_ || !index_builds_.empty(); });
      if (closing_) return;
      builds.swap(index_builds_);
    }
    // Every index found built serves at once; only then are the missing
    // ones built (each may take minutes), so that one new declaration does
    // not hold back the searches by all the others.
    std::vector<std::string> missing;
    for (const IndexBuild& b : builds)
      for (const std::string& name : b.fields) {
        auto built = SearchIndexBuilt(name);
        if (built.ok() && *built) {
          MutexLock l(search_mu_);
          searchable_.insert(name);
        } else if (std::find(missing.begin(), missing.end(), name) == missing.end()) {
          missing.push_back(name);
        }
      }
    Status s = Status::Ok();
    for (const std::string& name : missing)
      if (s.ok()) s = BuildSearchIndex(name);
    for (IndexBuild& b : builds) b.done(s);
  }
}

StatusOr<bool> PostgresStore::SearchIndexBuilt(const std::string& name) {
  SAGAD_RETURN_IF_ERROR(ValidateSearchAttributes({name}, "search attribute", true));
  auto valid = Query(("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('" +
                      SearchIndexName(name) + "')")
                         .c_str(),
                     {});
  if (!valid.ok()) return valid.status();
  return valid->rows() > 0 && valid->get(0, 0) == "t";
}

Status PostgresStore::BuildSearchIndex(const std::string& name) {
  SAGAD_RETURN_IF_ERROR(ValidateSearchAttributes({name}, "search attribute", true));
  auto c = Connection::Open(uri_, fence_.get());
  if (!c.ok()) return c.status();
  const std::string index = SearchIndexName(name);
  // A build that failed half-way leaves an invalid index of the name, which
  // IF NOT EXISTS would keep forever: dropped first.
  auto unbounded = (*c)->Exec("SET statement_timeout = 0; SET lock_timeout = 0");
  if (!unbounded.ok()) return unbounded.status();
  auto dropped = (*c)->Exec("DROP INDEX CONCURRENTLY IF EXISTS " + index, kIndexBuildDeadline);
  if (!dropped.ok()) return dropped.status();
  auto built = (*c)->Exec("CREATE INDEX CONCURRENTLY IF NOT EXISTS " + index +
                              " ON sagad_instances (" + FieldExpression(name) + ", id)",
                          kIndexBuildDeadline);
  if (!built.ok()) return built.status();
  {
    MutexLock l(search_mu_);
    searchable_.insert(name);
  }
  EngineLog({{"msg", "search attribute indexed"}, {"field", name}, {"index", index}});
  return Status::Ok();
}

}  // namespace sagad
