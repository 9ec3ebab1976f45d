// sagad on the PostgreSQL store (--store): the saga flows, SIGKILL and
// restart, two coordinators sharing the database, and database restarts
// while sagas are in flight. Real processes and a real server; every
// effect exactly once.
#include "tests/testing/postgres.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <thread>

#include "tests/testing/agent.h"
#include "tests/testing/cluster.h"
#include "tests/testing/non_fencing_service.h"
#include "tests/testing/tcp_proxy.h"

namespace sagad::testing {
namespace {

using nlohmann::json;

class PostgresCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override { uri_ = PostgresServer::Shared().NewDatabase(); }
  std::unique_ptr<Coordinator> Make(const std::string& name, int64_t lease_ms = 10000) {
    // data_dir is unused with a store URI: a missing path proves it.
    auto c = std::make_unique<Coordinator>(downstream_, dir_.path() + "/unused-" + name);
    c->Configure({{"coordinator_id", name}, {"lease_ms", lease_ms}, {"store", uri_}});
    return c;
  }
  // This test's database, reached through `proxy`.
  std::string Through(const TcpProxy& proxy) const {
    std::string uri = uri_;
    const std::string port = ":" + std::to_string(PostgresServer::Shared().port());
    return uri.replace(uri.find(port), port.size(), ":" + std::to_string(proxy.port()));
  }
  std::vector<std::string> SubmitMany(Coordinator& c, int n,
                                      const std::string& saga = "order_fulfilment") {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      Reply r = c.Submit(saga, saga == "order_fulfilment" ? OrderInput() : IncidentInput(), 0,
                         "k-" + std::to_string(next_key_++));
      EXPECT_EQ(r.status, 201) << r.raw;
      if (r.status == 201) ids.push_back(r.body["id"]);
    }
    return ids;
  }

  TempDir dir_;
  Downstream downstream_;
  std::string uri_;
  int next_key_ = 0;
};

TEST_F(PostgresCoordinatorTest, SagasRunToTheEndWithApprovalsAndKeyedReplays) {
  auto c = Make("pg-a");
  ASSERT_GT(c->Start(), 0);
  Reply order = c->Submit("order_fulfilment", OrderInput(), 10, "order-1");
  ASSERT_EQ(order.status, 200) << order.raw;
  EXPECT_EQ(order.body["status"], "COMPLETED");
  Reply again = c->Submit("order_fulfilment", OrderInput(), 10, "order-1");
  EXPECT_EQ(again.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(again.body["id"], order.body["id"]);
  Reply incident = c->Submit("incident_response", IncidentInput(), 10);
  ASSERT_EQ(incident.body["status"], "AWAITING_APPROVAL") << incident.raw;
  std::string id = incident.body["id"];
  EXPECT_EQ(c->Get("/v1/approvals").body["approvals"].size(), 1u);
  EXPECT_EQ(c->Get("/v1/instances?waiting=approval").body["instances"].size(), 1u);
  ASSERT_EQ(c->Post("/v1/instances/" + id + "/steps/notify_user/approve").status, 200);
  EXPECT_EQ(c->WaitStatus(id, "COMPLETED")["status"], "COMPLETED");
  EXPECT_EQ(c->Get("/v1/instances?status=COMPLETED").body["instances"].size(), 2u);
  EXPECT_EQ(c->Get("/readyz").status, 200);
  EXPECT_EQ(RepeatedEffects(downstream_), "");
  EXPECT_EQ(downstream_.Effects()["total"], 7);
  // Nothing was written to a data dir.
  EXPECT_NE(access((dir_.path() + "/unused-pg-a").c_str(), F_OK), 0);
  EXPECT_EQ(c->Terminate(), 0);
}

TEST_F(PostgresCoordinatorTest, SigkillMidFlightThenRestartLosesNothingAndDoesNothingTwice) {
  downstream_.Fault(
      {{"path", "/charges"}, {"action", "delay"}, {"delay_ms", 300}, {"times", 1000}});
  auto c = Make("pg-a");
  ASSERT_GT(c->Start(), 0);
  std::vector<std::string> ids = SubmitMany(*c, 20);
  ASSERT_TRUE(WaitFor([&] { return downstream_.Effects()["pending"].get<int>() > 0; }));
  c->Kill();
  ASSERT_GT(c->Start(), 0);
  for (const auto& id : ids) EXPECT_EQ(c->WaitStatus(id, "COMPLETED")["status"], "COMPLETED") << id;
  EXPECT_EQ(RepeatedEffects(downstream_), "");
}

// Two coordinators on one database: both serve the whole API; when one is
// killed, the other takes its instances over once their leases expire.
TEST_F(PostgresCoordinatorTest, TwoCoordinatorsShareTheWorkAndTheSurvivorTakesOver) {
  downstream_.Fault(
      {{"path", "/shipments"}, {"action", "delay"}, {"delay_ms", 200}, {"times", 1000}});
  auto a = Make("pg-a", 1000), b = Make("pg-b", 1000);
  ASSERT_GT(a->Start(), 0);
  ASSERT_GT(b->Start(), 0);
  std::vector<std::string> ids = SubmitMany(*a, 15);
  std::vector<std::string> more = SubmitMany(*b, 15);
  ids.insert(ids.end(), more.begin(), more.end());
  // Either serves any instance.
  EXPECT_EQ(b->Get("/v1/instances/" + ids.front()).status, 200);
  EXPECT_EQ(a->Get("/v1/instances/" + ids.back()).status, 200);
  a->Kill();
  for (const auto& id : ids) EXPECT_EQ(b->WaitStatus(id, "COMPLETED")["status"], "COMPLETED") << id;
  EXPECT_EQ(RepeatedEffects(downstream_), "");
  EXPECT_EQ(downstream_.Effects()["total"], int(3 * ids.size()));
  // An approval given to one is carried out by the owner.
  ASSERT_GT(a->Start(), 0);
  Reply incident = a->Submit("incident_response", IncidentInput(), 10);
  ASSERT_EQ(incident.body["status"], "AWAITING_APPROVAL");
  std::string id = incident.body["id"];
  ASSERT_EQ(b->Post("/v1/instances/" + id + "/steps/notify_user/approve").status, 200);
  EXPECT_EQ(a->WaitStatus(id, "COMPLETED")["status"], "COMPLETED");
}

// A toolbox's guard per principal (disable_account twice) raced by twelve
// runs of one principal, six appending through each of two coordinators
// sharing the database: exactly two calls pass, the others are 429 and
// record nothing.
TEST_F(PostgresCoordinatorTest, TwoCoordinatorsRacingForTheLastUnitOfAGuardNeverBothPass) {
  auto a = Make("pg-a"), b = Make("pg-b");
  ASSERT_GT(a->Start(), 0);
  ASSERT_GT(b->Start(), 0);
  const nlohmann::json toolbox = GuardedToolbox();
  for (Coordinator* c : {a.get(), b.get()}) {
    Reply deployed = Http(c->port(), "PUT", "/v1/toolboxes/guarded/versions/1", toolbox.dump(),
                          {{"Content-Type", "application/json"}});
    ASSERT_TRUE(deployed.status == 201 || deployed.status == 200) << deployed.raw;
  }
  std::vector<Agent> agents;
  for (int i = 0; i < 12; ++i) agents.emplace_back(i % 2 ? *b : *a, "");
  for (auto& agent : agents) {
    Reply opened =
        agent.Call("POST", "/v1/toolboxes/guarded/runs", {{"input", nlohmann::json::object()}});
    ASSERT_EQ(opened.status, 201) << opened.raw;
    agent.run = opened.body["id"];
  }
  auto [passed, refused] = RaceForDisableAccount(agents);
  EXPECT_EQ(passed, 2);
  EXPECT_EQ(refused, 10);
  EXPECT_EQ(downstream_.Effects()["by_route"].value("disable_account", 0), 2);
}

// An operator approves, through coordinator B, a call appended through A,
// B having cached the run before the call (it recorded the agent's
// decision): B's copy has no such call yet, and the approval must not be
// 404 for it (found by the simulator: the operator's approval refused
// forever).
TEST_F(PostgresCoordinatorTest, AnApprovalThroughAnotherCoordinatorFindsACallItHadNotSeen) {
  auto a = Make("pg-a"), b = Make("pg-b");
  ASSERT_GT(a->Start(), 0);
  ASSERT_GT(b->Start(), 0);
  Agent on_a{*a, ""}, on_b{*b, ""};
  Reply opened =
      on_a.Call("POST", "/v1/toolboxes/soc_tools/runs", {{"input", {{"incident", "I"}}}});
  ASSERT_EQ(opened.status, 201) << opened.raw;
  on_a.run = on_b.run = opened.body["id"];
  ASSERT_EQ(on_b.Call("POST", "/v1/instances/" + on_b.run + "/decisions",
                      {{"decision_id", "d"}, {"value", 1}})
                .status,
            201);
  Reply mail = on_a.Tool("mail", "notify_user", {{"to", "bob@example.com"}, {"body", "x"}});
  ASSERT_EQ(mail.body["status"], "AWAITING_APPROVAL") << mail.raw;
  Reply approved = b->Post("/v1/instances/" + on_b.run + "/steps/mail/approve");
  EXPECT_EQ(approved.status, 200) << approved.raw;
}

// The database crashes and restarts while sagas are in flight: while it is
// down sagad stays up, /readyz says 503 and submissions get 503 with
// Retry-After; afterwards everything finishes, each effect once.
TEST_F(PostgresCoordinatorTest, ADatabaseRestartLosesNothingAndDoesNothingTwice) {
  downstream_.Fault(
      {{"path", "/charges"}, {"action", "delay"}, {"delay_ms", 200}, {"times", 1000}});
  auto c = Make("pg-a");
  ASSERT_GT(c->Start(), 0);
  std::vector<std::string> ids = SubmitMany(*c, 20);
  ASSERT_TRUE(WaitFor([&] { return downstream_.Effects()["pending"].get<int>() > 0; }));
  auto& server = PostgresServer::Shared();
  server.Stop();
  EXPECT_TRUE(WaitFor([&] { return c->Get("/readyz").status == 503; }));
  Reply refused = c->Submit("order_fulfilment", OrderInput(), 0, "while-down");
  EXPECT_EQ(refused.status, 503) << refused.raw;
  EXPECT_EQ(refused.header("Retry-After"), "1");
  EXPECT_EQ(c->Get("/healthz").status, 200);
  server.Start();
  server.RestartImmediately();  // and once more, crashing it
  EXPECT_TRUE(WaitFor([&] { return c->Get("/readyz").status == 200; }, std::chrono::seconds(20)));
  // The refused submission left nothing behind: the same key goes through.
  Reply later = c->Submit("order_fulfilment", OrderInput(), 10, "while-down");
  EXPECT_EQ(later.status, 200) << later.raw;
  EXPECT_NE(later.header("Idempotent-Replayed"), "true");
  for (const auto& id : ids)
    EXPECT_EQ(c->WaitStatus(id, "COMPLETED", std::chrono::seconds(30))["status"], "COMPLETED")
        << id;
  EXPECT_EQ(RepeatedEffects(downstream_), "");
  EXPECT_EQ(c->Terminate(), 0);
}

// A partition: one coordinator is cut off from the database while its call
// is inside the downstream. The other takes the instance over once the
// lease expires (a new generation), asks the downstream, and finishes it;
// when the cut-off one comes back, its late commit is refused by the
// fencing check. Each effect once.
TEST_F(PostgresCoordinatorTest, ACutOffCoordinatorCommitsNothingAfterLosingItsLease) {
  downstream_.Fault({{"path", "/charges"}, {"action", "delay"}, {"delay_ms", 2500}});
  TcpProxy proxy(PostgresServer::Shared().port());
  const std::string via_proxy = Through(proxy);
  auto a = Make("pg-a", 1000), b = Make("pg-b", 1000);
  a->Configure({{"store", via_proxy}});
  ASSERT_GT(a->Start(), 0);
  ASSERT_GT(b->Start(), 0);
  Reply r = a->Submit("order_fulfilment", OrderInput());
  ASSERT_EQ(r.status, 201) << r.raw;
  std::string id = r.body["id"];
  ASSERT_TRUE(WaitFor([&] { return downstream_.Effects()["pending"] == 1; }));
  proxy.Cut();
  json done = b->WaitStatus(id, "COMPLETED", std::chrono::seconds(30));
  ASSERT_EQ(done["status"], "COMPLETED") << done.dump();
  json events = Events(*b, id);
  proxy.Restore();
  // A finds out: its retried commit is refused (lease lost) and it stops.
  EXPECT_TRUE(WaitFor([&] { return a->Get("/readyz").status == 200; }));
  EXPECT_FALSE(
      WaitFor([&] { return Events(*b, id).size() != events.size(); }, std::chrono::seconds(3)));
  EXPECT_EQ(RepeatedEffects(downstream_), "");
  EXPECT_EQ(downstream_.Effects()["total"], 3);
  EXPECT_EQ(b->Get("/v1/instances/" + id).body["status"], "COMPLETED");
}

// The connection to the database breaks while a submission's instance is
// being committed: after the server committed it (its answer lost), and
// before the server saw it. sagad reads back what happened on a new
// connection: the first client is answered its instance (not a 503, not a
// second instance), the second gets 503 and its retry with the same key
// makes the one instance.
TEST_F(PostgresCoordinatorTest, ASubmissionWhoseCommitIsCutOffIsReadBackNeverMadeTwice) {
  TcpProxy proxy(PostgresServer::Shared().port());
  auto a = Make("pg-drop");
  a->Configure({{"store", Through(proxy)}});
  ASSERT_GT(a->Start(), 0);
  auto count = [&](const std::string& customer) {
    return a->Get("/v1/instances?input.customer=" + customer).body["instances"].size();
  };
  json input = OrderInput();
  input["customer"] = "MARK-ANSWER-LOST";
  proxy.DropOn("MARK-ANSWER-LOST", /*deliver=*/true);
  Reply made = a->Submit("order_fulfilment", input, 10, "drop-1");
  EXPECT_EQ(proxy.dropped(), 1);
  ASSERT_EQ(made.status, 200) << made.raw;
  EXPECT_EQ(made.body["status"], "COMPLETED") << made.raw;
  Reply replay = a->Submit("order_fulfilment", input, 0, "drop-1");
  EXPECT_EQ(replay.body["id"], made.body["id"]);
  EXPECT_EQ(count("MARK-ANSWER-LOST"), 1u);

  input["customer"] = "MARK-NEVER-SENT";
  proxy.DropOn("MARK-NEVER-SENT", /*deliver=*/false);
  Reply refused = a->Submit("order_fulfilment", input, 10, "drop-2");
  EXPECT_EQ(proxy.dropped(), 2);
  EXPECT_EQ(refused.status, 503) << refused.raw;
  EXPECT_EQ(count("MARK-NEVER-SENT"), 0u);
  Reply retried = a->Submit("order_fulfilment", input, 10, "drop-2");
  ASSERT_EQ(retried.status, 200) << retried.raw;
  EXPECT_EQ(retried.body["status"], "COMPLETED");
  EXPECT_EQ(count("MARK-NEVER-SENT"), 1u);
  EXPECT_EQ(RepeatedEffects(downstream_), "");
}

// Regression: a database link that freezes (bytes held, nothing closed)
// stalls the store's writes, and with them every API handler thread that
// commits (two here, both taken by submissions). The watchdog says so
// (/readyz 503 naming the stall, one log line), /healthz still answers at
// once (both are answered on the event loop), and SIGTERM ends the process
// within the drain time plus 5 s, whatever is stuck.
TEST_F(PostgresCoordinatorTest, AFrozenDatabaseLinkIsNamedByTheWatchdogAndSigtermStillEndsSagad) {
  TcpProxy proxy(PostgresServer::Shared().port());
  const std::string via_proxy = Through(proxy);
  auto a = Make("pg-stall");
  a->Configure({{"store", via_proxy}, {"watchdog_ms", 1000}, {"api", {{"threads", 2}}}});
  const std::string log = dir_.path() + "/stall.log";
  a->LogTo(log);
  ASSERT_GT(a->Start(), 0);
  ASSERT_EQ(a->Submit("order_fulfilment", OrderInput(), 10).status, 200);
  // Three sagas whose first call is inside the downstream when the link
  // freezes: their outcomes are the writes that queue behind it.
  downstream_.Fault(
      {{"path", "/reservations"}, {"action", "delay"}, {"delay_ms", 1500}, {"times", 3}});
  for (int i = 0; i < 3; ++i) ASSERT_EQ(a->Submit("order_fulfilment", OrderInput()).status, 201);
  ASSERT_TRUE(WaitFor([&] { return downstream_.Effects()["pending"] == 3; }));
  proxy.Freeze();
  EXPECT_TRUE(WaitFor(
      [&] {
        std::ifstream in(log);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        return text.find("store stalled") != std::string::npos;
      },
      std::chrono::seconds(15)));
  // Submissions stuck behind the frozen link hold both handler threads
  // (their clients wait; answered or cut off at the end).
  std::vector<std::future<int>> stuck;
  for (int i = 0; i < 3; ++i)
    stuck.push_back(std::async(std::launch::async, [&, i] {
      return a->Submit("order_fulfilment", OrderInput(), 0, "stuck-" + std::to_string(i)).status;
    }));
  auto h0 = std::chrono::steady_clock::now();
  Reply ready = a->Get("/readyz");
  EXPECT_EQ(ready.status, 503) << ready.raw;
  EXPECT_NE(ready.raw.find("store is stalled"), std::string::npos) << ready.raw;
  EXPECT_EQ(a->Get("/healthz").status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - h0, std::chrono::seconds(2));
  auto t0 = std::chrono::steady_clock::now();
  a->process().Kill(SIGTERM);
  int code = a->process().Wait(std::chrono::seconds(10));
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_NE(code, -1) << "SIGTERM did not end sagad within 10 s";
  EXPECT_LT(took, std::chrono::seconds(10));
  proxy.Thaw();
  for (auto& s : stuck) s.wait();
}

// Regression, on PostgreSQL, with no pause: only the owner's link to
// the database freezes for 8 s (three leases) while most of its 30 first
// calls wait for one of the service's two connections. It cannot renew;
// the other coordinator takes the instances over, asks (nothing happened)
// and sends them again. When the link comes back, the requests still in
// the first owner's line must not leave: the service neither deduplicates
// nor fences, so each would be a second reservation.
TEST_F(PostgresCoordinatorTest, AFrozenDatabaseLinkLetsNoQueuedRequestLeaveAfterItsLease) {
  NonFencingService inventory("/reservations", 1000);
  TcpProxy proxy(PostgresServer::Shared().port());
  const std::string via_proxy = Through(proxy);
  json services = NonDeduplicating({"inventory", "payments", "shipping"});
  services["inventory"]["base_url"] = inventory.url();
  services["inventory"]["max_connections"] = 2;
  services["inventory"]["timeout_ms"] = 5000;
  auto make = [&](const std::string& name, const std::string& store) {
    auto c = std::make_unique<Coordinator>(downstream_, dir_.path() + "/unused-" + name, services);
    c->Configure({{"coordinator_id", name}, {"lease_ms", 3000}, {"store", store}});
    return c;
  };
  auto a = make("pg-line-a", via_proxy), b = make("pg-line-b", uri_);
  ASSERT_GT(a->Start(), 0);
  ASSERT_GT(b->Start(), 0);
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) {
    Reply r = a->Submit("order_fulfilment", OrderInput(), 0, "pg-line-" + std::to_string(i));
    ASSERT_EQ(r.status, 201) << r.raw;
    ids.push_back(r.body["id"]);
  }
  proxy.Freeze();  // the fault being injected: the link, not the process
  std::this_thread::sleep_for(std::chrono::milliseconds(8000));
  proxy.Thaw();
  for (const auto& id : ids) {
    json done = b->WaitStatus(id, "COMPLETED", std::chrono::seconds(90));
    EXPECT_EQ(done["status"], "COMPLETED") << id << ": " << done.dump();
  }
  EXPECT_EQ(inventory.NotOnce(30), "");
}

// One statement on the database, as an administrator would run it.
bool Sql(const std::string& uri, const std::string& statement) {
  PGconn* c = PQconnectdb(uri.c_str());
  PGresult* r = PQexec(c, statement.c_str());
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  PQfinish(c);
  return ok;
}

// Regression: a schema changed under a running sagad gave 500s with SQL in
// their detail, and /readyz said 200. Now: 503 with Retry-After and a
// reference, /readyz 503 until the schema is back.
TEST_F(PostgresCoordinatorTest, ASchemaChangedUnderSagadIsA503WithoutSqlAndNotReady) {
  auto c = Make("pg-a");
  ASSERT_GT(c->Start(), 0);
  Reply order = c->Submit("order_fulfilment", OrderInput(), 10);
  ASSERT_EQ(order.status, 200) << order.raw;
  std::string id = order.body["id"];
  ASSERT_TRUE(Sql(uri_, "ALTER TABLE sagad_instances RENAME COLUMN snapshot TO snapshot_gone"));
  Reply r = c->Get("/v1/instances/" + id);
  EXPECT_EQ(r.status, 503) << r.raw;
  EXPECT_EQ(r.header("Retry-After"), "1") << r.raw;
  std::string detail = r.body.value("detail", "");
  for (const char* sql : {"SELECT", "snapshot", "column", "ERROR", "LINE", "PL/pgSQL"})
    EXPECT_EQ(detail.find(sql), std::string::npos) << sql << " in: " << detail;
  EXPECT_NE(detail.find("ref-"), std::string::npos) << detail;
  // /readyz answers from its probe of the store (every 250 ms).
  EXPECT_TRUE(WaitFor([&] { return c->Get("/readyz").status == 503; }, std::chrono::seconds(3)));
  ASSERT_TRUE(Sql(uri_, "ALTER TABLE sagad_instances RENAME COLUMN snapshot_gone TO snapshot"));
  EXPECT_TRUE(WaitFor([&] { return c->Get("/v1/instances/" + id).status == 200; },
                      std::chrono::seconds(5)));
  EXPECT_TRUE(WaitFor([&] { return c->Get("/readyz").status == 200; }, std::chrono::seconds(10)));
  EXPECT_EQ(c->Terminate(), 0);
}

}  // namespace
}  // namespace sagad::testing
