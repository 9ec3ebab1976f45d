// The crash matrix for a graph: trip_booking's three bookings are in flight
// at once (each held 200 ms downstream) when sagad is killed
// (SAGA_CRASH_AT=<point>:<n>, the n-th time any worker reaches it), forward
// and while undoing, against a deduplicating and a non-deduplicating
// downstream. A restarted sagad reconciles every open branch before
// anything is re-sent: each effect happens exactly once.
#include <gtest/gtest.h>

#include "tests/testing/cluster.h"
#include "tests/testing/crash_matrix.h"

namespace sagad::testing {
namespace {

class GraphCrashTest : public ::testing::TestWithParam<CrashCase> {};

TEST_P(GraphCrashTest, EveryBranchTakesEffectExactlyOnce) {
  const CrashCase& c = GetParam();
  TempDir dir;
  Downstream downstream(c.dedup);
  for (const char* path : {"/flights/holds", "/hotels/bookings", "/cars/rentals"})
    downstream.Fault({{"path", path}, {"action", "delay"}, {"delay_ms", 200}});
  Coordinator sagad(downstream, dir.path() + "/data",
                    ServicesFor(c, {"airline", "hotel", "cars", "payments", "mail"}));
  CrashingSagad crashing(sagad, c);
  nlohmann::json input = TripInput();
  Reply r = sagad.Submit("trip_booking", input, 10, "trip-key");
  if (r.status == 0) {
    crashing.Restart(/*must_have_died=*/true);
    r = sagad.Submit("trip_booking", input, 10, "trip-key");
  }
  ASSERT_TRUE(r.body.is_object()) << r.raw;
  std::string id = r.body["id"];
  // Until the instance has `status`; a crash on the way: restart, wait on.
  nlohmann::json view;
  auto reach = [&](const std::string& status) {
    return WaitFor(
        [&] {
          Reply v = sagad.Get("/v1/instances/" + id + "?wait=1");
          if (v.status != 200) {
            crashing.Restart(/*must_have_died=*/true);
            return false;
          }
          view = v.body;
          return view.value("status", "") == status;
        },
        std::chrono::seconds(30));
  };
  ASSERT_TRUE(reach("AWAITING_APPROVAL")) << view.dump();
  std::string action = c.compensation ? "reject" : "approve";
  sagad.Post("/v1/instances/" + id + "/steps/issue_tickets/" + action, {{"reason", "test"}});
  std::string want = c.compensation ? "COMPENSATED" : "COMPLETED";
  ASSERT_TRUE(reach(want)) << view.dump();
  EXPECT_TRUE(crashing.Reached()) << "the crash point was never reached";
  const std::vector<std::string> forward = {"reserve_flight", "reserve_hotel", "reserve_car",
                                            "charge_payment"};
  if (!c.compensation) return ExpectEffects(downstream, 6, forward);
  std::vector<std::string> both = forward;
  for (const char* undo : {"cancel_flight", "cancel_hotel", "cancel_car", "refund_charge"})
    both.push_back(undo);
  ExpectEffects(downstream, 8, both);
}

// Forward n = 1..3: the three bookings, in flight together; undoing
// n = 2..3: the bookings' undos, after the charge's.
INSTANTIATE_TEST_SUITE_P(TripBooking, GraphCrashTest, ::testing::ValuesIn(CrashCases(3, 2, 3)),
                         CrashCaseName);

}  // namespace
}  // namespace sagad::testing
