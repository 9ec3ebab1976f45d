// The crash matrix for a graph: trip_booking's three bookings are in flight
// at once (each held 200 ms downstream) when sagad is killed
// (SAGA_CRASH_AT=<point>:<n>, the n-th time any worker reaches it), forward
// and while undoing, against a deduplicating and a non-deduplicating
// downstream. A restarted sagad reconciles every open branch before
// anything is re-sent: each effect happens exactly once.
#include <gtest/gtest.h>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

struct GraphCrashCase {
  std::string point;
  int n;
  bool dedup;
  bool compensation;
};

void PrintTo(const GraphCrashCase& c, std::ostream* os) {
  *os << c.point << ":" << c.n << (c.dedup ? " dedup" : " no-dedup");
}

class GraphCrashTest : public ::testing::TestWithParam<GraphCrashCase> {};

TEST_P(GraphCrashTest, EveryBranchTakesEffectExactlyOnce) {
  const GraphCrashCase& c = GetParam();
  TempDir dir;
  Downstream downstream(c.dedup);
  for (const char* path : {"/flights/holds", "/hotels/bookings", "/cars/rentals"})
    downstream.Fault({{"path", path}, {"action", "delay"}, {"delay_ms", 200}});
  Coordinator sagad(downstream, dir.path() + "/data",
                    c.dedup ? nlohmann::json::object()
                            : NonDeduplicating({"airline", "hotel", "cars", "payments", "mail"}));
  ASSERT_GT(sagad.Start(c.point + ":" + std::to_string(c.n)), 0);
  nlohmann::json input = TripInput();
  bool crashed = false;
  auto restart = [&] {
    if (crashed) return;
    ASSERT_EQ(sagad.process().Wait(), 75);
    crashed = true;
    ASSERT_GT(sagad.Start(), 0);
  };
  Reply r = sagad.Submit("trip_booking", input, 10, "trip-key");
  if (r.status == 0) {
    restart();
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
            restart();
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
  if (!crashed) {
    WaitFor([&] { return !sagad.process().Running(); }, std::chrono::seconds(5));
    if (!sagad.process().Running()) restart();
  }
  EXPECT_TRUE(crashed) << "the crash point was never reached";
  EXPECT_EQ(RepeatedEffects(downstream), "");
  nlohmann::json e = downstream.Effects();
  for (const char* route : {"reserve_flight", "reserve_hotel", "reserve_car", "charge_payment"})
    EXPECT_EQ(e["by_route"].value(route, 0), 1) << route << " " << e.dump();
  if (c.compensation) {
    for (const char* route : {"cancel_flight", "cancel_hotel", "cancel_car", "refund_charge"})
      EXPECT_EQ(e["by_route"].value(route, 0), 1) << route << " " << e.dump();
    EXPECT_EQ(e["total"], 8) << e.dump();
  } else {
    EXPECT_EQ(e["total"], 6) << e.dump();
  }
}

std::vector<GraphCrashCase> Cases() {
  std::vector<GraphCrashCase> out;
  for (bool dedup : {true, false}) {
    // n = 1..3: the three bookings, in flight together.
    for (const char* p : {"before_started", "after_started", "before_outcome", "after_outcome"})
      for (int n = 1; n <= 3; ++n) out.push_back({p, n, dedup, false});
    // n = 2..3: the bookings' undos, after the charge's.
    for (const char* p : {"before_compensation_started", "after_compensation_started",
                          "before_compensation_outcome", "after_compensation_outcome"})
      for (int n = 2; n <= 3; ++n) out.push_back({p, n, dedup, true});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(TripBooking, GraphCrashTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<GraphCrashCase>& i) {
                           return i.param.point + "_" + std::to_string(i.param.n) +
                                  (i.param.dedup ? "_dedup" : "_no_dedup");
                         });

}  // namespace
}  // namespace sagad::testing
