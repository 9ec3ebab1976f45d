// Retention: finished instances are deleted finished_after_ms after they
// finished, with their events and submission keys; unfinished ones stay.
#include <gtest/gtest.h>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

using nlohmann::json;

TEST(RetentionTest, FinishedInstancesGoAfterTheRetentionPeriodUnfinishedOnesStay) {
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  sagad.Configure({{"retention", {{"finished_after_ms", 300}}}});
  ASSERT_GT(sagad.Start(), 0);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    Reply r = sagad.Submit("order_fulfilment", OrderInput(), 10, "order-" + std::to_string(i));
    ASSERT_EQ(r.body["status"], "COMPLETED") << r.raw;
    ids.push_back(r.body["id"]);
  }
  Reply waiting = sagad.Submit("incident_response", IncidentInput(), 10);
  ASSERT_EQ(waiting.body["status"], "AWAITING_APPROVAL");
  for (const auto& id : ids) {
    EXPECT_TRUE(WaitFor([&] { return sagad.Get("/v1/instances/" + id).status == 404; })) << id;
    EXPECT_EQ(sagad.Get("/v1/instances/" + id + "/events").status, 404);
  }
  EXPECT_NE(sagad.Get("/metrics").raw.find("sagad_retention_deleted_total 3"), std::string::npos);
  EXPECT_EQ(sagad.Get("/v1/instances/" + waiting.body["id"].get<std::string>()).status, 200);
  // The key was replayable until its instance went; now it starts a new one.
  Reply again = sagad.Submit("order_fulfilment", OrderInput(), 10, "order-0");
  EXPECT_EQ(again.status, 200) << again.raw;
  EXPECT_NE(again.header("Idempotent-Replayed"), "true");
  EXPECT_NE(again.body["id"], ids[0]);
}

}  // namespace
}  // namespace sagad::testing
