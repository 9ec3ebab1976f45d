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
  StepMark a0 = t.TryMarkStep("a", 0, 2);
  EXPECT_TRUE(a0);
  EXPECT_EQ(a0.step(), 0);
  EXPECT_FALSE(t.TryMarkStep("a", 0, 2));  // under way already
  StepMark a1 = t.TryMarkStep("a", 1, 2);
  EXPECT_TRUE(a1);
  EXPECT_FALSE(t.TryMarkStep("a", 2, 2));  // max_parallel reached
  StepMark b2 = t.TryMarkStep("b", 2, 2);  // per instance
  EXPECT_TRUE(b2);
  EXPECT_EQ(t.Busy(), 3u);
  EXPECT_TRUE(t.StepUnderWay("a", 1));
  a1.Release();
  a1.Release();  // twice is harmless
  EXPECT_FALSE(a1);
  EXPECT_EQ(a1.step(), -1);
  EXPECT_FALSE(t.StepUnderWay("a", 1));
  EXPECT_TRUE(t.TryMarkStep("a", 2, 2));  // (released again at once: a temporary)
  EXPECT_FALSE(t.StepUnderWay("a", 2));
}

// A mark is released by whoever holds it last, and only once: moved, the
// old holder releases nothing; assigned over, the mark it held goes.
TEST(RunTableTest, AMarkIsReleasedOnceByItsLastHolder) {
  RunTable t;
  {
    StepMark m = t.TryMarkStep("a", 0, 8);
    StepMark moved = std::move(m);
    EXPECT_FALSE(m);  // NOLINT(bugprone-use-after-move): what a move leaves
    m.Release();      // nothing: the mark is moved's
    EXPECT_TRUE(t.StepUnderWay("a", 0));
    moved = t.TryMarkStep("a", 1, 8);  // 0 released, 1 taken
    EXPECT_FALSE(t.StepUnderWay("a", 0));
    EXPECT_TRUE(t.StepUnderWay("a", 1));
    EXPECT_EQ(moved.step(), 1);
  }
  EXPECT_FALSE(t.StepUnderWay("a", 1));  // its holder went
  EXPECT_EQ(t.Busy(), 0u);
  bool then_ran = false;
  StepMark m = t.TryMarkStep("a", 0, 8);
  t.ReleaseThen(m, [&] {
    then_ran = true;
    EXPECT_FALSE(t.StepUnderWay("a", 0));  // released before `then`
  });
  EXPECT_TRUE(then_ran);
  EXPECT_FALSE(m);
}

TEST(RunTableTest, OneWakeUpPerInstanceTheEarliest) {
  RunTable t;
  uint64_t superseded = 7;
  EXPECT_TRUE(t.ClaimWake("a", 1000, 0, &superseded));
  EXPECT_EQ(superseded, 0u);
  EXPECT_TRUE(t.WakeSet("a", 1000, 11));
  EXPECT_FALSE(t.ClaimWake("a", 2000, 0, &superseded));   // an earlier one is pending
  EXPECT_TRUE(t.ClaimWake("a", 500, 0, &superseded));     // earlier: set a timer
  EXPECT_EQ(superseded, 11u);                             // and cancel the later one
  EXPECT_FALSE(t.WakeSet("a", 1000, 12));                 // replaced meanwhile
  EXPECT_TRUE(t.ClaimWake("a", 2000, 600, &superseded));  // the pending one is past
  t.WakeFired("a", 2000);
  EXPECT_TRUE(t.ClaimWake("a", 3000, 700, &superseded));
  t.WakeFired("a", 1000);  // a stale timer does not clear the newer wake-up
  EXPECT_FALSE(t.ClaimWake("a", 4000, 800, &superseded));
  EXPECT_EQ(t.PendingWakes(), 1u);
}

// A finished instance keeps no wake-up: its entry goes and the caller gets
// the timer to cancel.
TEST(RunTableTest, ADroppedWakeUpLeavesNothingBehind) {
  RunTable t;
  uint64_t superseded = 0;
  EXPECT_EQ(t.DropWake("a"), 0u);
  ASSERT_TRUE(t.ClaimWake("a", 1000, 0, &superseded));
  EXPECT_TRUE(t.WakeSet("a", 1000, 42));
  EXPECT_EQ(t.PendingWakes(), 1u);
  EXPECT_EQ(t.DropWake("a"), 42u);
  EXPECT_EQ(t.PendingWakes(), 0u);
  EXPECT_FALSE(t.WakeSet("a", 1000, 43));  // a late handle is not kept
  EXPECT_TRUE(t.ClaimWake("a", 2000, 0, &superseded));
  EXPECT_EQ(superseded, 0u);
}

TEST(RunTableTest, StopWaitsForDriversAndStepsAndRefusesNewOnes) {
  RunTable t;
  ASSERT_TRUE(t.Enter("a"));
  StepMark b0 = t.TryMarkStep("b", 0, 1);
  ASSERT_TRUE(b0);
  auto stopped = std::async(std::launch::async, [&] { return t.StopAndWait(); });
  // StopAndWait cannot return while "a" runs and "b" has a step under way.
  while (!t.Stopping()) std::this_thread::yield();
  EXPECT_FALSE(t.Enter("c"));
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  EXPECT_FALSE(t.Enter("a"));                             // no extra round while stopping
  EXPECT_EQ(t.Leave("a", true), RunTable::After::kDone);  // nor a requeue
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  EXPECT_FALSE(t.TryMarkStep("c", 0, 1));  // no new mark while stopping
  b0.Release();
  EXPECT_TRUE(stopped.get());
  EXPECT_FALSE(t.StopAndWait());  // already stopped
}

}  // namespace
}  // namespace sagad
