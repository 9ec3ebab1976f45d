// What only the PostgreSQL store has: its schema stamp, the URI rules, and
// what it does when the server goes away and comes back.
#include "coordinator/store/postgres/postgres_store.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <future>

#include "tests/testing/postgres.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/tcp_proxy.h"

namespace sagad {
namespace {

void Exec(const std::string& uri, const std::string& sql) {
  PGconn* c = PQconnectdb(uri.c_str());
  ASSERT_EQ(PQstatus(c), CONNECTION_OK);
  PGresult* r = PQexec(c, sql.c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(c);
  PQclear(r);
  PQfinish(c);
}

TEST(PostgresStoreTest, RefusesANewerSchema) {
  std::string uri = testing::PostgresServer::Shared().NewDatabase();
  ASSERT_TRUE(PostgresStore::Open(uri).ok());
  ASSERT_TRUE(PostgresStore::Open(uri).ok());  // a second start migrates nothing
  Exec(uri, "UPDATE sagad_meta SET value = '99' WHERE key = 'schema_version'");
  auto refused = PostgresStore::Open(uri);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("newer"), std::string::npos);
}

TEST(PostgresStoreTest, AnUnreachableServerIsUnavailableAndThePasswordNeverShows) {
  auto s = PostgresStore::Open("postgresql://u:s3cret-pw@127.0.0.1:1/db");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.status().message().find("s3cret-pw"), std::string::npos) << s.status().message();
  EXPECT_EQ(RedactUri("postgresql://u:pw@h:5/db?sslmode=require"),
            "postgresql://u:***@h:5/db?sslmode=require");
  EXPECT_EQ(RedactUri("postgresql://h/db?password=pw&x=1"), "postgresql://h/db?password=***&x=1");
  EXPECT_TRUE(IsPostgresUri("postgres://h/db"));
  EXPECT_FALSE(IsPostgresUri("/var/lib/sagad"));
}

// A restart of the server (in-flight work lost, committed kept): calls fail
// as Unavailable while it is down, then the same store object goes on.
TEST(PostgresStoreTest, ARestartOfTheServerIsUnavailableThenResumes) {
  auto& server = testing::PostgresServer::Shared();
  std::string uri = server.NewDatabase();
  auto s = PostgresStore::Open(uri, 2, /*readback_ms=*/500);
  ASSERT_TRUE(s.ok());
  PostgresStore& store = **s;
  nlohmann::json snap = {{"id", "a"}, {"version", 1}, {"status", "RUNNING"}, {"saga", "s"}};
  Event e;
  e.seq = 1;
  e.type = "c";
  ASSERT_TRUE(store.CreateInstance(snap, {e}, nullptr, {}, nullptr).ok());
  server.Stop();
  Status down = store.CheckWritable();
  EXPECT_EQ(down.code(), StatusCode::kUnavailable) << down.ToString();
  snap["version"] = 2;
  e.seq = 2;
  EXPECT_EQ(store.Commit("a", 1, snap, {e}, {}, {}, nullptr).code(), StatusCode::kUnavailable);
  server.Start();
  EXPECT_TRUE(testing::WaitFor([&] { return store.CheckWritable().ok(); }));
  EXPECT_TRUE(store.Commit("a", 1, snap, {e}, {}, {}, nullptr).ok());
  EXPECT_EQ(store.GetInstance("a")->value("version", 0), 2);
}

// The same database reached through a proxy on `proxy_port`.
std::string Through(const std::string& uri, int server_port, int proxy_port) {
  std::string from = ":" + std::to_string(server_port) + "/";
  size_t at = uri.find(from);
  return uri.substr(0, at) + ":" + std::to_string(proxy_port) + "/" + uri.substr(at + from.size());
}

int64_t Count(const std::string& uri, const std::string& sql) {
  PGconn* c = PQconnectdb(uri.c_str());
  PGresult* r = PQexec(c, sql.c_str());
  int64_t n = PQresultStatus(r) == PGRES_TUPLES_OK ? std::atoll(PQgetvalue(r, 0, 0)) : -1;
  PQclear(r);
  PQfinish(c);
  return n;
}

// A connection that breaks during a commit, the two ways it can: with the
// commit made (its answer lost) or not. The store reads back what happened,
// on a new connection, and neither writes it again nor calls it failed.
class CommitDropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& server = testing::PostgresServer::Shared();
    uri_ = server.NewDatabase();
    proxy_ = std::make_unique<testing::TcpProxy>(server.port());
    auto s = PostgresStore::Open(Through(uri_, server.port(), proxy_->port()), 2, 10000);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
    ASSERT_TRUE(store_->CreateInstance(Snap(1, "RUNNING"), {Ev(1)}, nullptr, {}, nullptr).ok());
  }
  static nlohmann::json Snap(int version, const std::string& status) {
    return {{"id", "a"}, {"version", version}, {"status", status}, {"saga", "s"}};
  }
  static Event Ev(uint64_t seq) {
    Event e;
    e.seq = seq;
    e.type = "e" + std::to_string(seq);
    return e;
  }
  int64_t Events() { return Count(uri_, "SELECT count(*) FROM sagad_events"); }
  std::string uri_;
  std::unique_ptr<testing::TcpProxy> proxy_;
  std::unique_ptr<PostgresStore> store_;
};

TEST_F(CommitDropTest, ACommitWhoseAnswerIsLostIsReadBackAsMade) {
  proxy_->DropOn("MARK-ANSWER-LOST", /*deliver=*/true);
  Status s = store_->Commit("a", 1, Snap(2, "MARK-ANSWER-LOST"), {Ev(2)}, {}, {}, nullptr);
  EXPECT_EQ(proxy_->dropped(), 1);
  EXPECT_TRUE(s.ok()) << s.ToString();  // not "version changed", not "unavailable"
  EXPECT_EQ(store_->GetInstance("a")->value("version", 0), 2);
  EXPECT_EQ(Events(), 2);
  // The store goes on as the instance's writer.
  EXPECT_TRUE(store_->Commit("a", 2, Snap(3, "RUNNING"), {Ev(3)}, {}, {}, nullptr).ok());
  EXPECT_EQ(Events(), 3);
}

TEST_F(CommitDropTest, ACommitThatNeverArrivedIsReadBackAsNotMade) {
  proxy_->DropOn("MARK-NEVER-SENT", /*deliver=*/false);
  Status s = store_->Commit("a", 1, Snap(2, "MARK-NEVER-SENT"), {Ev(2)}, {}, {}, nullptr);
  EXPECT_EQ(proxy_->dropped(), 1);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("this write was not committed"), std::string::npos) << s.message();
  EXPECT_EQ(store_->GetInstance("a")->value("version", 0), 1);
  EXPECT_EQ(Events(), 1);
  // Decided again by its writer, it is made once.
  EXPECT_TRUE(store_->Commit("a", 1, Snap(2, "RUNNING"), {Ev(2)}, {}, {}, nullptr).ok());
  EXPECT_EQ(Events(), 2);
}

TEST_F(CommitDropTest, ACreateWithAKeyWhoseAnswerIsLostIsReadBackAsCreated) {
  Submission sub;
  sub.key = "k1";
  sub.request_hash = "h";
  sub.instance_id = "b";
  sub.created_at = 1;
  nlohmann::json snap = {{"id", "b"}, {"version", 1}, {"status", "MARK-CREATE"}, {"saga", "s"}};
  proxy_->DropOn("MARK-CREATE", /*deliver=*/true);
  Status s = store_->CreateInstance(snap, {Ev(1)}, &sub, {}, nullptr);
  EXPECT_EQ(proxy_->dropped(), 1);
  EXPECT_TRUE(s.ok()) << s.ToString();  // not "exists"
  EXPECT_EQ(store_->GetSubmission("k1")->instance_id, "b");
}

// A batch declared dead by a read-back can never land afterwards (one that
// was still on its way when the read-back ran).
TEST_F(CommitDropTest, ABatchReadBackAsNotMadeCanNeverLandLater) {
  EXPECT_EQ(Count(uri_, "SELECT count(*) FROM sagad_batch_outcome('late') AS o WHERE o IS NULL"),
            1);
  nlohmann::json w = {{"kind", "commit"},
                      {"id", "a"},
                      {"expected_version", 1},
                      {"version", 2},
                      {"saga", "s"},
                      {"status", "RUNNING"},
                      {"finished", false},
                      {"updated_at", 0},
                      {"snapshot", "{}"},
                      {"events", {Ev(2).ToJson()}},
                      {"operations", nlohmann::json::array()},
                      {"outbox", nlohmann::json::array()}};
  PGconn* c = PQconnectdb(uri_.c_str());
  const std::string batch = nlohmann::json::array({w}).dump();
  const char* params[] = {"late", batch.c_str()};
  PGresult* r = PQexecParams(c, "SELECT sagad_apply_batch($1, $2::json)", 2, nullptr, params,
                             nullptr, nullptr, 0);
  EXPECT_EQ(PQresultStatus(r), PGRES_FATAL_ERROR);
  EXPECT_STREQ(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23505");
  PQclear(r);
  PQfinish(c);
  EXPECT_EQ(store_->GetInstance("a")->value("version", 0), 1);
  EXPECT_EQ(Events(), 1);
}

// The first column of the first row of `sql`.
std::string Value(const std::string& uri, const std::string& sql) {
  PGconn* c = PQconnectdb(uri.c_str());
  PGresult* r = PQexec(c, sql.c_str());
  std::string out = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0
                        ? PQgetvalue(r, 0, 0)
                        : std::string("error: ") + PQerrorMessage(c);
  PQclear(r);
  PQfinish(c);
  return out;
}

// Every documented filter, a search by an input field (a declared
// search attribute or not) and by a run's metadata field are planned on an
// index over 20,000 stored instances: EXPLAIN shows no sequential scan.
TEST(PostgresStoreTest, EveryFilterIsPlannedOnAnIndex) {
  const std::string uri = testing::PostgresServer::Shared().NewDatabase();
  ASSERT_TRUE(PostgresStore::Open(uri).ok());
  Exec(uri,
       "INSERT INTO sagad_instances SELECT lpad(to_hex(i), 12, '0') || '-' || "
       "lpad(to_hex(i), 16, '0'), CASE WHEN i % 2 = 0 THEN 'order_fulfilment' ELSE 'other' END, "
       "CASE WHEN i % 1000 = 0 THEN 'NEEDS_REVIEW' ELSE 'COMPLETED' END, "
       "CASE WHEN i % 1000 = 0 THEN 'review' END, 1, i % 1000 <> 0, "
       "json_build_object('owner', 'agent-' || (i % 50), 'input', "
       "json_build_object('customer', 'c-' || (i % 1000)), 'metadata', "
       "json_build_object('agent', 'bot-' || (i % 100)))::text "
       "FROM generate_series(1, 20000) i");
  Exec(uri,
       "INSERT INTO sagad_attributes SELECT 'customer', snapshot::jsonb -> 'input' ->> "
       "'customer', id FROM sagad_instances");
  Exec(uri, "ANALYZE sagad_instances; ANALYZE sagad_attributes");
  std::vector<std::pair<std::string, InstanceFilter>> filters;
  InstanceFilter f;
  f.status = "NEEDS_REVIEW";
  filters.push_back({"status", f});
  f = InstanceFilter();
  f.waiting = "review";
  filters.push_back({"waiting", f});
  f = InstanceFilter();
  f.saga = "order_fulfilment";
  f.status = "NEEDS_REVIEW";
  filters.push_back({"saga and status", f});
  f = InstanceFilter();
  f.owner = "agent-7";
  filters.push_back({"owner", f});
  f = InstanceFilter();
  f.input_field = "customer";
  f.input_value = "c-7";
  filters.push_back({"input.customer", f});
  f.in_metadata = true;
  f.input_field = "agent";
  f.input_value = "bot-7";
  filters.push_back({"metadata.agent", f});
  f = InstanceFilter();
  f.created_after = 0x4e00;
  filters.push_back({"created_after", f});
  // The same search from a declared attribute's rows: newest first from
  // their primary key, read backward.
  f = InstanceFilter();
  f.input_field = "customer";
  f.input_value = "c-7";
  f.status = "COMPLETED";
  filters.push_back({"declared input.customer", f});
  for (const auto& [name, filter] : filters) {
    std::vector<std::string> params;
    const bool declared = name.rfind("declared", 0) == 0;
    std::string sql = PostgresStore::ListStatement(filter, 50, "", &params, declared);
    for (size_t n = params.size(); n >= 1; --n) {  // $10 before $1
      std::string literal = "'";
      for (char c : params[n - 1]) literal += c == '\'' ? std::string("''") : std::string(1, c);
      literal += "'";
      const std::string tag = "$" + std::to_string(n);
      for (size_t at; (at = sql.find(tag)) != std::string::npos;)
        sql.replace(at, tag.size(), literal);
    }
    const std::string plan = Value(uri, "EXPLAIN (FORMAT JSON) " + sql);
    EXPECT_EQ(plan.find("error:"), std::string::npos) << name << ": " << plan;
    EXPECT_EQ(plan.find("Seq Scan"), std::string::npos) << name << ": " << plan;
    EXPECT_NE(plan.find("Index"), std::string::npos) << name << ": " << plan;
    if (declared) {
      EXPECT_NE(plan.find("sagad_attributes_pkey"), std::string::npos) << plan;
      EXPECT_NE(plan.find("Backward"), std::string::npos) << plan;
    }
  }
}

// Declared search attributes: the instances stored before the declaration
// and those created after it are found from sagad_attributes (planned as a
// backward scan of its primary key: newest first, a page read), paged by
// cursor; retention deletes their rows; a saga that has not declared the
// field and a value too long to be indexed are still found (from the GIN
// index), never silently missed.
TEST(PostgresStoreTest, ADeclaredSearchAttributeIsAnsweredFromItsTable) {
  const std::string uri = testing::PostgresServer::Shared().NewDatabase();
  auto opened = PostgresStore::Open(uri);
  ASSERT_TRUE(opened.ok());
  PostgresStore& store = **opened;
  auto create = [&](const std::string& id, const std::string& saga, const std::string& customer,
                    const std::string& status) {
    nlohmann::json snap = {{"id", id},     {"version", 1},    {"status", status},
                           {"saga", saga}, {"updated_at", 1}, {"input", {{"customer", customer}}}};
    Event e;
    e.seq = 1;
    e.type = "c";
    ASSERT_TRUE(store.CreateInstance(snap, {e}, nullptr, {}, nullptr).ok()) << id;
  };
  create("i-01", "orders", "rare", "RUNNING");
  create("i-02", "orders", "common", "RUNNING");
  create("i-03", "orders", "rare", "COMPLETED");
  EXPECT_EQ(Value(uri, "SELECT count(*) FROM sagad_attributes"), "0");  // nothing declared
  std::promise<Status> declared;
  store.DeclareSearchAttributesAsync("orders", {"customer", "sku"},
                                     [&](Status s) { declared.set_value(s); });
  ASSERT_TRUE(declared.get_future().get().ok());
  EXPECT_EQ(Value(uri, "SELECT count(*) FROM sagad_search_attributes WHERE complete"), "2");
  create("i-04", "orders", "rare", "RUNNING");
  create("i-05", "orders", std::string(1001, 'x'), "RUNNING");
  EXPECT_EQ(Value(uri, "SELECT count(*) FROM sagad_attributes"), "4");

  InstanceFilter rare;
  rare.input_field = "customer";
  rare.input_value = "rare";
  auto page = store.ListInstances(rare, 2, "");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->instances.size(), 2u);
  EXPECT_EQ(page->instances[0]["id"], "i-04");
  EXPECT_EQ(page->instances[1]["id"], "i-03");
  ASSERT_EQ(page->next_cursor, "i-03");
  page = store.ListInstances(rare, 2, page->next_cursor);
  ASSERT_EQ(page->instances.size(), 1u);
  EXPECT_EQ(page->instances[0]["id"], "i-01");
  rare.status = "RUNNING";
  rare.saga = "orders";
  EXPECT_EQ(store.ListInstances(rare, 10, "")->instances.size(), 2u);
  // Too long to be indexed: found all the same.
  InstanceFilter long_value;
  long_value.input_field = "customer";
  long_value.input_value = std::string(1001, 'x');
  ASSERT_EQ(store.ListInstances(long_value, 10, "")->instances.size(), 1u);
  // Retention deletes the finished one with its rows.
  ASSERT_TRUE(store.DeleteFinished(2, 10).ok());
  EXPECT_EQ(Value(uri, "SELECT count(*) FROM sagad_attributes WHERE instance_id = 'i-03'"), "0");
  rare = InstanceFilter();
  rare.input_field = "customer";
  rare.input_value = "rare";
  EXPECT_EQ(store.ListInstances(rare, 10, "")->instances.size(), 2u);
  // A saga that declared nothing: a search across sagas still finds its
  // instance (the table is not used for it).
  create("j-01", "returns", "rare", "RUNNING");
  page = store.ListInstances(rare, 10, "");
  ASSERT_EQ(page->instances.size(), 3u);
  EXPECT_EQ(page->instances[0]["id"], "j-01");
}

}  // namespace
}  // namespace sagad
