#include "coordinator/engine/metrics/engine_metrics.h"

#include <gtest/gtest.h>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "tests/testing/subprocess.h"

namespace sagad {
namespace {

TEST(EngineMetricsTest, KnownSeriesAreExportedAtZeroBeforeAnything) {
  EngineMetrics m;
  testing::TempDir dir;
  auto store = LmdbStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  std::string text = m.Text(**store);
  for (const char* line :
       {"sagad_step_calls_total{phase=\"forward\",outcome=\"unknown\"} 0",
        "sagad_reconciliations_total{phase=\"compensation\",answer=\"not_happened\"} 0",
        "sagad_events_total{type=\"saga_needs_review\"} 0", "sagad_retries_total 0",
        "sagad_instances_active 0", "sagad_outbox_backlog 0"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
}

TEST(EngineMetricsTest, CountsCallsEventsAndTheLongestCommit) {
  EngineMetrics m;
  CallResult res;
  res.outcome = Outcome::kUnknown;
  res.replayed = true;
  m.Call("forward", res, std::chrono::milliseconds(5), {"order_fulfilment", "charge", "payments"});
  EXPECT_EQ(m.Get("sagad_step_calls_total", "phase=\"forward\",outcome=\"unknown\""), 1);
  EXPECT_EQ(m.Get("sagad_duplicate_effects_detected_total"), 1);
  Event retry;
  retry.type = "started";
  retry.data = {{"attempt", 2}};
  Event review;
  review.type = "saga_needs_review";
  m.Committed({retry, review});
  EXPECT_EQ(m.Get("sagad_retries_total"), 1);
  EXPECT_EQ(m.Get("sagad_escalations_total"), 1);
  EXPECT_EQ(m.Get("sagad_events_total", "type=\"started\""), 1);
  m.CommitAttempt(std::chrono::milliseconds(40));
  m.CommitAttempt(std::chrono::milliseconds(3));
  testing::TempDir dir;
  auto store = LmdbStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  EXPECT_NE(m.Text(**store).find("sagad_store_commit_max_seconds 0.040"), std::string::npos);
  m.RetryBudgetExhausted("payments");
  EXPECT_EQ(m.Get("sagad_retry_budget_exhausted_total", "service=\"payments\""), 1);
}

// Calls, latency and compensations by saga, step and service: the series a
// dashboard breaks down by, rendered with the labels escaped.
TEST(EngineMetricsTest, CallsAreLabelledBySagaStepAndService) {
  EngineMetrics m;
  CallResult res;
  res.outcome = Outcome::kCommitted;
  m.Call("forward", res, std::chrono::milliseconds(30), {"order", "charge", "payments"});
  m.Call("compensation", res, std::chrono::milliseconds(2), {"order", "charge", "payments"});
  m.Call("forward", res, std::chrono::milliseconds(2), {"odd\"saga", "s", "svc"});
  const std::string at = "saga=\"order\",step=\"charge\",service=\"payments\"";
  EXPECT_EQ(
      m.Get("sagad_step_calls_by_step_total", at + ",phase=\"forward\",outcome=\"committed\""), 1);
  EXPECT_EQ(m.Get("sagad_compensations_total", at + ",outcome=\"committed\""), 1);
  testing::TempDir dir;
  auto store = LmdbStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  std::string text = m.Text(**store);
  for (const std::string& line :
       {"sagad_step_call_seconds_bucket{" + at + ",phase=\"forward\",le=\"0.05\"} 1",
        "sagad_step_call_seconds_bucket{" + at + ",phase=\"forward\",le=\"0.025\"} 0",
        "sagad_step_call_seconds_count{" + at + ",phase=\"compensation\"} 1",
        std::string("saga=\"odd\\\"saga\""), std::string("sagad_step_latency_seconds_count 3")})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
}

}  // namespace
}  // namespace sagad
