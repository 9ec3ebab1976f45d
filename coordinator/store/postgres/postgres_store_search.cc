// PostgresStore: declared search attributes (Store::
// DeclareSearchAttributesAsync). A declared field's values live in
// sagad_attributes (name, value, instance_id), written by sagad_apply once
// when an instance is created, so a search by it is a backward scan of that
// table's primary key: newest first, a page read and no more, whatever the
// history holds; no transition pays for it (an index on an expression of the
// snapshot would recompute it on every UPDATE).
//
// A declaration is recorded under a SHARE lock on sagad_instances: every
// creation in flight has committed before it and every later one sees it
// (and writes its rows). The instances stored before it get their rows
// from a backfill thread, a bounded batch per statement; the field is then
// "complete", and only from then on does a search use the table (before, it
// is answered as it always was, from the GIN index on the input).
#include <thread>

#include "coordinator/store/postgres/postgres_connection.h"
#include "coordinator/store/postgres/postgres_rows.h"
#include "coordinator/store/postgres/postgres_store.h"
#include "sagas/search_attributes.h"
#include "util/log.h"

namespace sagad {

namespace {

// Instances a backfill statement handles: well within the statement
// timeout on a loaded machine.
constexpr int kBackfillBatch = 2000;

// A text[] literal of `names` (each a field name: [A-Za-z0-9_.-] only, as
// ValidateSearchAttributes allows).
std::string TextArray(const std::vector<std::string>& names) {
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + ("\"" + names[i] + "\"");
  return out + "}";
}

}  // namespace

StatusOr<std::vector<std::string>> PostgresStore::Declare(const std::string& saga,
                                                          const std::vector<std::string>& fields) {
  auto held = Query("SELECT name, complete FROM sagad_search_attributes WHERE saga = $1", {saga});
  if (!held.ok()) return held.status();
  std::vector<std::string> incomplete, missing;
  for (int i = 0; i < held->rows(); ++i)
    if (held->get(i, 1) != "t") incomplete.push_back(held->get(i, 0));
  for (const std::string& f : fields) {
    bool known = false;
    for (int i = 0; i < held->rows(); ++i) known = known || held->get(i, 0) == f;
    if (!known) missing.push_back(f);
  }
  if (missing.empty()) return incomplete;
  auto c = Acquire();
  if (!c.ok()) return c.status();
  Connection& conn = **c;
  auto done = [&](Status s) -> Status {
    if (!s.ok()) (void)conn.Exec("ROLLBACK");
    Release(std::move(*c));
    return s;
  };
  auto lock = conn.Exec("BEGIN; LOCK TABLE sagad_instances IN SHARE MODE");
  if (!lock.ok()) return done(lock.status());
  auto put = conn.Run(
      "INSERT INTO sagad_search_attributes (saga, name) SELECT $1, unnest($2::text[]) "
      "ON CONFLICT DO NOTHING",
      {saga, TextArray(missing)});
  if (!put.ok()) return done(put.status());
  auto commit = conn.Exec("COMMIT");
  if (!commit.ok()) return done(commit.status());
  (void)done(Status::Ok());
  for (auto& f : missing) incomplete.push_back(std::move(f));
  return incomplete;
}

Status PostgresStore::Backfill(const std::string& saga, const std::vector<std::string>& names) {
  std::string after;
  size_t batches = 0;
  for (;;) {
    {
      MutexLock l(close_mu_);
      if (closing_) return Unavailable("the store is closing");
    }
    auto r = Query("SELECT sagad_backfill_attributes($1, $2, $3::int, $4::text[])",
                   {saga, after, std::to_string(kBackfillBatch), TextArray(names)});
    if (!r.ok()) return r.status();
    if (r->rows() == 0 || r->null(0, 0)) break;
    after = r->get(0, 0);
    ++batches;
  }
  EngineLog({{"msg", "search attributes indexed"},
             {"saga", saga},
             {"fields", names},
             {"batches", batches}});
  return Status::Ok();
}

void PostgresStore::DeclareSearchAttributesAsync(const std::string& saga,
                                                 const std::vector<std::string>& fields,
                                                 std::function<void(Status)> done) {
  auto names = Declare(saga, fields);
  if (!names.ok() || names->empty()) return done(names.status());
  MutexLock l(backfill_mu_);
  backfills_.emplace_back([this, saga, names = std::move(*names), done = std::move(done)]() {
    done(Backfill(saga, names));
  });
}

void PostgresStore::JoinBackfills() {
  std::vector<std::thread> threads;
  {
    MutexLock l(backfill_mu_);
    threads.swap(backfills_);
  }
  for (auto& t : threads) t.join();
}

StatusOr<bool> PostgresStore::AttributeComplete(const InstanceFilter& f) {
  if (f.input_field.empty() || f.input_value.size() > kMaxIndexedAttributeBytes) return false;
  const std::string name = (f.in_metadata ? kMetadataAttributePrefix : "") + f.input_field;
  if (!f.saga.empty()) {
    auto r =
        Query("SELECT 1 FROM sagad_search_attributes WHERE saga = $1 AND name = $2 AND complete",
              {f.saga, name});
    if (!r.ok()) return r.status();
    return r->rows() > 0;
  }
  // Every saga that has instances (one probe of the saga index each) must
  // have the field complete.
  auto r = Query(
      "WITH RECURSIVE s(saga) AS ("
      " (SELECT saga FROM sagad_instances ORDER BY saga LIMIT 1)"
      " UNION ALL SELECT (SELECT i.saga FROM sagad_instances i WHERE i.saga > s.saga"
      "                   ORDER BY i.saga LIMIT 1) FROM s WHERE s.saga IS NOT NULL) "
      "SELECT 1 FROM s WHERE s.saga IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
      "sagad_search_attributes d WHERE d.saga = s.saga AND d.name = $1 AND d.complete) LIMIT 1",
      {name});
  if (!r.ok()) return r.status();
  return r->rows() == 0;
}

}  // namespace sagad
