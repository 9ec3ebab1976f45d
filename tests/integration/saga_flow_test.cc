// End to end: real sagad and example-services processes on loopback, a real
// LMDB data dir, effects counted by the downstream.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

class SagaFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator_ = std::make_unique<Coordinator>(downstream_, dir_.path() + "/data");
    ASSERT_GT(coordinator_->Start(), 0);
  }
  std::vector<std::string> EventTypes(const std::string& id, const std::string& type) {
    std::vector<std::string> steps;
    for (const auto& e : Events(*coordinator_, id))
      if (e["type"] == type) steps.push_back(e.value("step", ""));
    return steps;
  }

  TempDir dir_;
  Downstream downstream_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(SagaFlowTest, IncidentResponseWaitsForApprovalThenCompletes) {
  Reply r = coordinator_->Submit("incident_response", IncidentInput(), 10);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["status"], "AWAITING_APPROVAL");
  EXPECT_EQ(r.header("Location"), "/v1/instances/" + r.body["id"].get<std::string>());
  std::string id = r.body["id"];
  EXPECT_EQ(downstream_.RouteCount("send_message"), 0);

  Reply approvals = coordinator_->Get("/v1/approvals");
  ASSERT_EQ(approvals.body["approvals"].size(), 1u);
  EXPECT_EQ(approvals.body["approvals"][0]["step"], "notify_user");

  Reply a =
      coordinator_->Post("/v1/instances/" + id + "/steps/notify_user/approve", {{"comment", "go"}});
  ASSERT_EQ(a.status, 200) << a.raw;
  nlohmann::json done = coordinator_->WaitStatus(id, "COMPLETED");
  ASSERT_EQ(done["status"], "COMPLETED");
  EXPECT_EQ(done["steps"][0]["external_ref"], "T-1");
  EXPECT_EQ(done["steps"][3]["key"], id + ":notify_user");
  for (const char* route : {"create_ticket", "isolate_host", "disable_account", "send_message"})
    EXPECT_EQ(downstream_.RouteCount(route), 1) << route;
  EXPECT_EQ(downstream_.Effects()["duplicates"], 0);
  EXPECT_EQ(EventTypes(id, "approved"), std::vector<std::string>{"notify_user"});
}

TEST_F(SagaFlowTest, OrderFulfilmentCompletesWithoutHumans) {
  Reply r = coordinator_->Submit("order_fulfilment", OrderInput(), 10);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["status"], "COMPLETED");
  EXPECT_EQ(downstream_.Effects()["total"], 3);
}

TEST_F(SagaFlowTest, RejectionCompensatesEveryCommittedStepInReverseOrder) {
  Reply r = coordinator_->Submit("incident_response", IncidentInput(), 10);
  std::string id = r.body["id"];
  Reply rej = coordinator_->Post("/v1/instances/" + id + "/steps/notify_user/reject",
                                 {{"reason", "false positive"}});
  ASSERT_EQ(rej.status, 200) << rej.raw;
  nlohmann::json done = coordinator_->WaitStatus(id, "COMPENSATED");
  ASSERT_EQ(done["status"], "COMPENSATED");
  EXPECT_EQ(done["steps"][3]["status"], "REJECTED");
  EXPECT_EQ(EventTypes(id, "compensated"),
            (std::vector<std::string>{"disable_account", "isolate_host", "create_ticket"}));
  for (const char* route : {"close_ticket", "release_host", "restore_account"})
    EXPECT_EQ(downstream_.RouteCount(route), 1) << route;
  EXPECT_EQ(downstream_.RouteCount("send_message"), 0);
}

struct RejectCase {
  std::string saga;
  std::string failing_path;
  int failing_index;
};

void PrintTo(const RejectCase& c, std::ostream* os) {
  *os << c.saga << " fails at " << c.failing_path;
}

class DefiniteFailureTest : public SagaFlowTest,
                            public ::testing::WithParamInterface<RejectCase> {};

TEST_P(DefiniteFailureTest, CompensatesExactlyTheEarlierCommittedStepsOnce) {
  const RejectCase& c = GetParam();
  static const std::map<std::string, std::vector<std::pair<std::string, std::string>>> kRoutes = {
      {"order_fulfilment",
       {{"reserve_inventory", "release_reservation"},
        {"charge_payment", "refund_charge"},
        {"create_shipment", "cancel_shipment"}}},
      {"incident_response",
       {{"create_ticket", "close_ticket"},
        {"isolate_host", "release_host"},
        {"disable_account", "restore_account"}}}};
  downstream_.Fault({{"path", c.failing_path}, {"action", "reject"}, {"status", 422}});
  nlohmann::json input = c.saga == "order_fulfilment" ? OrderInput() : IncidentInput();
  Reply r = coordinator_->Submit(c.saga, input, 10);
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["status"], "COMPENSATED") << r.raw;
  std::string id = r.body["id"];
  EXPECT_EQ(r.body["steps"][c.failing_index]["status"], "FAILED");
  const auto& routes = kRoutes.at(c.saga);
  std::vector<std::string> expected_order;
  for (int j = 0; j < static_cast<int>(routes.size()); ++j) {
    bool committed = j < c.failing_index;
    EXPECT_EQ(downstream_.RouteCount(routes[j].first), committed ? 1 : 0) << routes[j].first;
    EXPECT_EQ(downstream_.RouteCount(routes[j].second), committed ? 1 : 0) << routes[j].second;
  }
  for (int j = c.failing_index - 1; j >= 0; --j)
    expected_order.push_back(r.body["steps"][j]["name"]);
  EXPECT_EQ(EventTypes(id, "compensated"), expected_order);
}

INSTANTIATE_TEST_SUITE_P(EachStep, DefiniteFailureTest,
                         ::testing::Values(RejectCase{"order_fulfilment", "/reservations", 0},
                                           RejectCase{"order_fulfilment", "/charges", 1},
                                           RejectCase{"order_fulfilment", "/shipments", 2},
                                           RejectCase{"incident_response", "/tickets", 0},
                                           RejectCase{"incident_response", "/hosts/isolate", 1},
                                           RejectCase{"incident_response", "/accounts/disable", 2}),
                         [](const ::testing::TestParamInfo<RejectCase>& i) {
                           return i.param.saga + "_step" + std::to_string(i.param.failing_index);
                         });

TEST_F(SagaFlowTest, InstanceWaitingForApprovalSurvivesSigkill) {
  Reply r = coordinator_->Submit("incident_response", IncidentInput(), 10);
  ASSERT_EQ(r.body["status"], "AWAITING_APPROVAL");
  std::string id = r.body["id"];
  coordinator_->Kill();
  ASSERT_GT(coordinator_->Start(), 0);
  Reply again = coordinator_->Get("/v1/instances/" + id);
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(again.body["status"], "AWAITING_APPROVAL");
  EXPECT_TRUE(WaitFor([&] {
    return coordinator_->Get("/metrics").raw.find("sagad_recovery_latency_seconds_count 1") !=
           std::string::npos;
  })) << coordinator_->Get("/metrics").raw;
  ASSERT_EQ(coordinator_->Post("/v1/instances/" + id + "/steps/notify_user/approve").status, 200);
  EXPECT_EQ(coordinator_->WaitStatus(id, "COMPLETED")["status"], "COMPLETED");
  EXPECT_EQ(downstream_.Effects()["total"], 4);
  EXPECT_EQ(downstream_.Effects()["duplicates"], 0);
}

TEST_F(SagaFlowTest, CancelCompensatesAndIsRefusedOnceCompleted) {
  Reply r = coordinator_->Submit("incident_response", IncidentInput(), 10);
  std::string id = r.body["id"];
  Reply c =
      coordinator_->Post("/v1/instances/" + id + "/cancel", {{"reason", "duplicate incident"}});
  ASSERT_EQ(c.status, 200) << c.raw;
  EXPECT_EQ(coordinator_->WaitStatus(id, "COMPENSATED")["status"], "COMPENSATED");
  EXPECT_EQ(downstream_.RouteCount("close_ticket"), 1);

  Reply o = coordinator_->Submit("order_fulfilment", OrderInput(), 10);
  ASSERT_EQ(o.body["status"], "COMPLETED");
  Reply late = coordinator_->Post("/v1/instances/" + o.body["id"].get<std::string>() + "/cancel");
  EXPECT_EQ(late.status, 409);
  EXPECT_EQ(late.header("Content-Type"), "application/problem+json");
}

TEST_F(SagaFlowTest, KnownCountersAreExportedAtZeroFromTheFirstScrape) {
  std::string m = coordinator_->Get("/metrics").raw;
  for (const char* line :
       {"sagad_step_calls_total{phase=\"forward\",outcome=\"unknown\"} 0",
        "sagad_step_calls_total{phase=\"compensation\",outcome=\"failed\"} 0",
        "sagad_reconciliations_total{phase=\"compensation\",answer=\"unknown\"} 0",
        "sagad_events_total{type=\"saga_needs_review\"} 0",
        "sagad_events_total{type=\"compensated\"} 0", "sagad_escalations_total 0"})
    EXPECT_NE(m.find(line), std::string::npos) << line << "\n" << m;
}

TEST_F(SagaFlowTest, MetricsCountOutcomesReconciliationsAndEvents) {
  downstream_.Fault({{"path", "/charges"}, {"action", "commit_500"}});
  Reply r = coordinator_->Submit("order_fulfilment", OrderInput(), 10);
  ASSERT_EQ(r.body["status"], "COMPLETED");
  std::string m = coordinator_->Get("/metrics").raw;
  for (const char* line :
       {"sagad_step_calls_total{phase=\"forward\",outcome=\"committed\"} 2",
        "sagad_step_calls_total{phase=\"forward\",outcome=\"unknown\"} 1",
        "sagad_reconciliations_total{phase=\"forward\",answer=\"happened\"} 1",
        "sagad_events_total{type=\"saga_completed\"} 1", "sagad_instances_active 0",
        "# TYPE sagad_step_latency_seconds histogram"})
    EXPECT_NE(m.find(line), std::string::npos) << line << "\n" << m;
  // The exposition is valid for Prometheus' own linter.
  std::string path = dir_.path() + "/metrics.txt";
  std::ofstream(path) << m;
  EXPECT_EQ(std::system(("promtool check metrics < " + path + " > " + path + ".out 2>&1").c_str()),
            0)
      << std::ifstream(path + ".out").rdbuf();
}

TEST_F(SagaFlowTest, SigtermDrainsAndExitsZero) {
  Reply r = coordinator_->Submit("order_fulfilment", OrderInput(), 10);
  ASSERT_EQ(r.body["status"], "COMPLETED");
  EXPECT_EQ(coordinator_->Terminate(), 0);
}

}  // namespace
}  // namespace sagad::testing
