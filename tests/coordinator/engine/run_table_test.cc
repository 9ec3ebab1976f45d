#include "coordinator/engine/instances/run_table.h"

#include <gtest/gtest.h>

#include <future>

namespace sagad {
namespace {

TEST(RunTableTest, OneDriverPerInstanceAndARequestMeanwhileMeansAnotherRound) {
  RunTable t;
  EXPECT_TRUE(t.Enter("a"));
  EXPECT_FALSE(t.Enter("a"));  // running: it will go round again
  EXPECT_TRUE(t.Enter("b"));
  EXPECT_EQ(t.Leave("a", false), RunTable::After::kAgain);
  EXPECT_EQ(t.Leave("a", false), RunTable::After::kDone);
  EXPECT_TRUE(t.Enter("a"));  // ended: a new driver may start
  EXPECT_EQ(t.Leave("a", true), RunTable::After::kRequeue);
  EXPECT_FALSE(t.Enter("a"));  // requeued drivers are still registered
  EXPECT_EQ(t.Leave("a", true), RunTable::After::kRequeue);  // the yield wins
  EXPECT_EQ(t.Leave("a", false), RunTable::After::kDone);
}

TEST(RunTableTest, StepsAreMarkedOnceAndWithinTheLimit) {
  RunTable t;
  EXPECT_TRUE(t.TryMarkStep("a", 0, 2));
  EXPECT_FALSE(t.TryMarkStep("a", 0, 2));  // under way already
  EXPECT_TRUE(t.TryMarkStep("a", 1, 2));
  EXPECT_FALSE(t.TryMarkStep("a", 2, 2));  // max_parallel reached
  EXPECT_TRUE(t.TryMarkStep("b", 2, 2));   // per instance
  EXPECT_EQ(t.Busy(), 3u);
  EXPECT_TRUE(t.StepUnderWay("a", 1));
  t.UnmarkStep("a", 1);
  t.UnmarkStep("a", 1);  // twice is harmless
  EXPECT_FALSE(t.StepUnderWay("a", 1));
  EXPECT_TRUE(t.TryMarkStep("a", 2, 2));
}

TEST(RunTableTest, OneWakeUpPerInstanceTheEarliest) {
  RunTable t;
  EXPECT_TRUE(t.ClaimWake("a", 1000, 0));
  EXPECT_FALSE(t.ClaimWake("a", 2000, 0));   // an earlier one is pending
  EXPECT_TRUE(t.ClaimWake("a", 500, 0));     // earlier: set a timer
  EXPECT_TRUE(t.ClaimWake("a", 2000, 600));  // the pending one is past
  t.WakeFired("a", 2000);
  EXPECT_TRUE(t.ClaimWake("a", 3000, 700));
  t.WakeFired("a", 1000);  // a stale timer does not clear the newer wake-up
  EXPECT_FALSE(t.ClaimWake("a", 4000, 800));
}

TEST(RunTableTest, StopWaitsForDriversAndStepsAndRefusesNewOnes) {
  RunTable t;
  ASSERT_TRUE(t.Enter("a"));
  ASSERT_TRUE(t.TryMarkStep("b", 0, 1));
  auto stopped = std::async(std::launch::async, [&] { return t.StopAndWait(); });
  // StopAndWait cannot return while "a" runs and "b" has a step under way.
  while (!t.Stopping()) std::this_thread::yield();
  EXPECT_FALSE(t.Enter("c"));
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  EXPECT_FALSE(t.Enter("a"));                             // no extra round while stopping
  EXPECT_EQ(t.Leave("a", true), RunTable::After::kDone);  // nor a requeue
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  t.UnmarkStep("b", 0);
  EXPECT_TRUE(stopped.get());
  EXPECT_FALSE(t.StopAndWait());  // already stopped
}

}  // namespace
}  // namespace sagad
