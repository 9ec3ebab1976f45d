// What only the PostgreSQL store has: its schema stamp, the URI rules, and
// what it does when the server goes away and comes back.
#include "coordinator/store/postgres/postgres_store.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include "tests/testing/postgres.h"
#include "tests/testing/subprocess.h"

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
  auto s = PostgresStore::Open(uri, 2);
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

}  // namespace
}  // namespace sagad
