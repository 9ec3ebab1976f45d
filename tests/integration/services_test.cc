// Per-service limits and pause against real sagad and example-services
// processes: a paused service gets no new request (and stays paused across a
// restart), a resume lets the waiting steps go, max_in_flight bounds what is
// under way.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

using nlohmann::json;

class ServicesTest : public ::testing::Test {
 protected:
  void Start(json overrides = json::object()) {
    coordinator_ =
        std::make_unique<Coordinator>(downstream_, dir_.path() + "/data", std::move(overrides));
    ASSERT_GT(coordinator_->Start(), 0);
  }
  json Service(const std::string& name) {
    Reply r = coordinator_->Get("/v1/services");
    EXPECT_EQ(r.status, 200) << r.raw;
    for (const auto& s : r.body["services"])
      if (s["name"] == name) return s;
    return nullptr;
  }
  // The view of the instance's step `step`.
  json StepView(const std::string& id, const std::string& step) {
    Reply r = coordinator_->Get("/v1/instances/" + id);
    for (const auto& s : r.body["steps"])
      if (s["name"] == step) return s;
    return nullptr;
  }

  TempDir dir_;
  Downstream downstream_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(ServicesTest, APausedServiceGetsNoNewRequestAcrossARestartUntilResumed) {
  Start();
  Reply paused = coordinator_->Post("/v1/services/payments/pause", {{"reason", "incident 7"}});
  ASSERT_EQ(paused.status, 200) << paused.raw;
  EXPECT_EQ(paused.body["paused"], true);
  // Who paused it, why and since when, as every coordinator reads it.
  EXPECT_EQ(paused.body["pause"]["reason"], "incident 7") << paused.raw;
  EXPECT_TRUE(paused.body["pause"]["by"].is_string()) << paused.raw;
  EXPECT_GT(paused.body["pause"]["since"].get<int64_t>(), 0) << paused.raw;
  EXPECT_EQ(Service("payments")["paused"], true);
  EXPECT_EQ(Service("inventory")["paused"], false);

  Reply sub = coordinator_->Submit("order_fulfilment", OrderInput());
  ASSERT_EQ(sub.status, 201) << sub.raw;
  const std::string id = sub.body["id"];
  // The reservation goes; the charge waits for its service, named in its view.
  ASSERT_TRUE(WaitFor(
      [&] { return StepView(id, "charge_payment").value("waiting_for", "") == "payments"; }));
  EXPECT_EQ(StepView(id, "charge_payment")["status"], "PLANNED");
  EXPECT_EQ(StepView(id, "reserve_inventory")["status"], "COMMITTED");
  EXPECT_GE(Service("payments")["queued"].get<int>(), 1);
  EXPECT_EQ(downstream_.RouteCount("charge_payment"), 0);

  // A restart keeps the pause: the instance resumes and still waits.
  coordinator_->Kill();
  ASSERT_GT(coordinator_->Start(), 0);
  EXPECT_EQ(Service("payments")["paused"], true);
  EXPECT_EQ(Service("payments")["pause"], paused.body["pause"]);  // kept across the restart
  ASSERT_TRUE(WaitFor(
      [&] { return StepView(id, "charge_payment").value("waiting_for", "") == "payments"; }));
  EXPECT_EQ(downstream_.RouteCount("charge_payment"), 0);

  Reply resumed = coordinator_->Post("/v1/services/payments/resume");
  ASSERT_EQ(resumed.status, 200) << resumed.raw;
  EXPECT_EQ(resumed.body["paused"], false);
  EXPECT_TRUE(resumed.body["pause"].is_null()) << resumed.raw;
  coordinator_->WaitStatus(id, "COMPLETED");
  EXPECT_EQ(downstream_.RouteCount("charge_payment"), 1);
  EXPECT_EQ(RepeatedEffects(downstream_), "");
  EXPECT_FALSE(StepView(id, "charge_payment").contains("waiting_for"));
  // The metrics say the same.
  Reply metrics = coordinator_->Get("/metrics");
  EXPECT_NE(metrics.raw.find("sagad_service_paused{service=\"payments\"} 0"), std::string::npos);
}

TEST_F(ServicesTest, AnUnknownServiceIs404AndAMalformedBody400) {
  Start();
  Reply unknown = coordinator_->Post("/v1/services/nope/pause");
  EXPECT_EQ(unknown.status, 404) << unknown.raw;
  Reply bad = coordinator_->Post("/v1/services/payments/pause", {{"reason", 7}});
  EXPECT_EQ(bad.status, 400) << bad.raw;
  EXPECT_EQ(Service("payments")["paused"], false);
}

TEST_F(ServicesTest, MaxInFlightBoundsWhatIsUnderWayAndEverySagaCompletes) {
  Start({{"payments", {{"max_in_flight", 1}, {"max_connections", 4}}}});
  EXPECT_EQ(Service("payments")["max_in_flight"], 1);
  EXPECT_TRUE(Service("inventory")["max_in_flight"].is_null());
  EXPECT_EQ(Service("payments")["max_connections"], 4);
  EXPECT_EQ(Service("inventory")["max_connections"], 64);
  downstream_.Fault({{"path", "/charges"}, {"action", "delay"}, {"delay_ms", 300}, {"times", 6}});
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    json input = OrderInput();
    input["sku"] = "sku-" + std::to_string(i);
    Reply r = coordinator_->Submit("order_fulfilment", input);
    ASSERT_EQ(r.status, 201) << r.raw;
    ids.push_back(r.body["id"]);
  }
  int most = 0;
  bool queued = false;
  ASSERT_TRUE(WaitFor(
      [&] {
        json s = Service("payments");
        most = std::max(most, s["in_flight"].get<int>());
        queued = queued || s["queued"].get<int>() > 0;
        return downstream_.RouteCount("charge_payment") == 6;
      },
      std::chrono::seconds(30)));
  EXPECT_LE(most, 1);
  EXPECT_TRUE(queued);  // with six at once, some waited for the one slot
  for (const auto& id : ids) coordinator_->WaitStatus(id, "COMPLETED");
  EXPECT_EQ(RepeatedEffects(downstream_), "");
}

// Bulk actions live beside the services: both are an
// operator acting on many at once.
TEST_F(ServicesTest, BulkActionsJudgeEachInstanceAsItsSingleAction) {
  Start();
  // A reversible step that waits for an operator (an irreversible one is
  // never approved in bulk: below).
  json gated = {
      {"steps",
       {{{"name", "reserve"},
         {"requires_approval", true},
         {"forward", {{"service", "inventory"}, {"path", "/reservations"}}},
         {"compensation",
          {{"service", "inventory"}, {"path", "/reservations/{{reserve.ref}}/release"}}}}}}};
  ASSERT_EQ(Http(coordinator_->port(), "PUT", "/v1/sagas/gated/versions/1", gated.dump()).status,
            201);
  std::vector<std::string> waiting;
  for (int i = 0; i < 3; ++i) {
    Reply r = coordinator_->Submit("gated", json::object(), 10);
    ASSERT_EQ(r.status, 200) << r.raw;
    ASSERT_EQ(r.body["status"], "AWAITING_APPROVAL") << r.raw;
    waiting.push_back(r.body["id"]);
  }
  Reply incident = coordinator_->Submit("incident_response", IncidentInput(), 10);
  ASSERT_EQ(incident.body["status"], "AWAITING_APPROVAL") << incident.raw;
  Reply pivot =
      coordinator_->Post("/v1/instances/actions/approve", {{"ids", {incident.body["id"]}}});
  EXPECT_EQ(pivot.body["results"][0]["http_status"], 409) << pivot.raw;
  EXPECT_NE(pivot.raw.find("irreversible"), std::string::npos) << pivot.raw;
  // By ids: two real ones and one that does not exist.
  Reply approved = coordinator_->Post(
      "/v1/instances/actions/approve",
      {{"ids", {waiting[0], waiting[1], "0123456789ab-0123456789abcdef"}}, {"comment", "bulk"}});
  ASSERT_EQ(approved.status, 200) << approved.raw;
  const json& results = approved.body["results"];
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0]["http_status"], 200);
  EXPECT_EQ(results[1]["http_status"], 200);
  EXPECT_EQ(results[2]["http_status"], 404);
  coordinator_->WaitStatus(waiting[0], "COMPLETED");
  coordinator_->WaitStatus(waiting[1], "COMPLETED");
  // Approving again is what the single action says of a repeat.
  Reply again = coordinator_->Post("/v1/instances/actions/approve", {{"ids", {waiting[0]}}});
  EXPECT_EQ(again.body["results"][0]["http_status"], 409) << again.raw;

  // By filter: every instance awaiting approval, rejected.
  Reply rejected =
      coordinator_->Post("/v1/instances/actions/reject",
                         {{"filter", {{"status", "AWAITING_APPROVAL"}, {"saga", "gated"}}},
                          {"limit", 10},
                          {"reason", "false alarm"}});
  ASSERT_EQ(rejected.status, 200) << rejected.raw;
  ASSERT_EQ(rejected.body["results"].size(), 1u) << rejected.raw;
  EXPECT_EQ(rejected.body["results"][0]["id"], waiting[2]);
  EXPECT_EQ(rejected.body["results"][0]["http_status"], 200);
  coordinator_->WaitStatus(waiting[2], "COMPENSATED");

  // Malformed requests name what is wrong.
  EXPECT_EQ(coordinator_->Post("/v1/instances/actions/cancel", json::object()).status, 400);
  EXPECT_EQ(coordinator_
                ->Post("/v1/instances/actions/cancel",
                       {{"ids", json::array()}, {"filter", json::object()}})
                .status,
            400);
  Reply typo = coordinator_->Post("/v1/instances/actions/cancel", {{"filter", {{"stat", "X"}}}});
  EXPECT_EQ(typo.status, 400);
  EXPECT_NE(typo.raw.find("stat"), std::string::npos) << typo.raw;
  EXPECT_EQ(coordinator_->Post("/v1/instances/actions/cancel", {{"ids", {1}}}).status, 400);
}

// Definitions over the API: deployed, immutable per version,
// kept across a restart, run like any other.
TEST_F(ServicesTest, ADeployedDefinitionRunsAndIsImmutablePerVersion) {
  Start();
  json def = {{"steps",
               {{{"name", "reserve"},
                 {"forward",
                  {{"service", "inventory"},
                   {"path", "/reservations"},
                   {"body", {{"sku", "{{input.sku}}"}, {"qty", 1}}}}},
                 {"compensation",
                  {{"service", "inventory"}, {"path", "/reservations/{{reserve.ref}}/release"}}}}}},
              {"input", {"sku"}}};
  auto put = [&](const std::string& path, const json& body) {
    return Http(coordinator_->port(), "PUT", path, body.dump(),
                {{"Content-Type", "application/json"}});
  };
  Reply created = put("/v1/sagas/restock/versions/1", def);
  ASSERT_EQ(created.status, 201) << created.raw;
  EXPECT_EQ(created.body["name"], "restock");
  EXPECT_EQ(put("/v1/sagas/restock/versions/1", def).status, 200);  // the same again
  json other = def;
  other["deadline_ms"] = 60000;
  Reply conflict = put("/v1/sagas/restock/versions/1", other);
  EXPECT_EQ(conflict.status, 409) << conflict.raw;
  json nowhere = def;
  nowhere["steps"][0]["forward"]["service"] = "teleport";
  Reply unknown = put("/v1/sagas/restock/versions/2", nowhere);
  EXPECT_EQ(unknown.status, 400) << unknown.raw;
  EXPECT_NE(unknown.raw.find("teleport"), std::string::npos) << unknown.raw;
  json misnamed = def;
  misnamed["name"] = "other";
  EXPECT_EQ(put("/v1/sagas/restock/versions/2", misnamed).status, 400);
  EXPECT_EQ(put("/v1/sagas/restock/versions/0", def).status, 400);

  Reply got = coordinator_->Get("/v1/sagas/restock/versions/1");
  ASSERT_EQ(got.status, 200) << got.raw;
  EXPECT_EQ(got.body["steps"][0]["name"], "reserve");
  EXPECT_EQ(coordinator_->Get("/v1/sagas/restock/versions/7").status, 404);

  // Kept across a restart, and run.
  coordinator_->Kill();
  ASSERT_GT(coordinator_->Start(), 0);
  EXPECT_EQ(coordinator_->Get("/v1/sagas/restock/versions/1").status, 200);
  Reply run = coordinator_->Submit("restock", {{"sku", "kit"}}, 10);
  ASSERT_EQ(run.status, 200) << run.raw;
  EXPECT_EQ(run.body["status"], "COMPLETED");
  EXPECT_EQ(put("/v1/sagas/restock/versions/1", other).status, 409);  // still immutable
}

}  // namespace
}  // namespace sagad::testing
