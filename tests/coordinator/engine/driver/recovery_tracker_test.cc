#include "coordinator/engine/driver/recovery_tracker.h"

#include <gtest/gtest.h>

namespace sagad {
namespace {

using std::chrono::milliseconds;

TEST(RecoveryTrackerTest, InProgressUntilEveryInstanceIsResumedOrForgotten) {
  RecoveryTracker r;
  RecoveryTracker::TimePoint t0{milliseconds(1000)};
  EXPECT_FALSE(r.InProgress(t0));
  r.Begin({"a", "b", "c"}, t0);
  EXPECT_TRUE(r.InProgress(t0));
  auto secs = r.Resumed("a", t0 + milliseconds(250));
  ASSERT_TRUE(secs);
  EXPECT_DOUBLE_EQ(*secs, 0.25);
  EXPECT_FALSE(r.Resumed("a", t0 + milliseconds(300)));  // once
  EXPECT_FALSE(r.Resumed("new", t0));                    // not from start-up
  r.Forget("b");
  EXPECT_EQ(r.waiting(), 1u);
  EXPECT_TRUE(r.InProgress(t0));
  EXPECT_TRUE(r.Resumed("c", t0));
  EXPECT_FALSE(r.InProgress(t0));
}

TEST(RecoveryTrackerTest, BoundedInTime) {
  RecoveryTracker r;
  RecoveryTracker::TimePoint t0{milliseconds(1000)};
  r.Begin({"never"}, t0);
  EXPECT_TRUE(r.InProgress(t0 + RecoveryTracker::kLongest - milliseconds(1)));
  EXPECT_FALSE(r.InProgress(t0 + RecoveryTracker::kLongest));
}

}  // namespace
}  // namespace sagad
