// AsioExecutor: an owner's tasks run on one thread, one at a time, and only
// there is the thread its owner's (Executor::OnOwner); timers reach the
// owner too; Shutdown runs what was queued.
#include "coordinator/engine/owners/asio_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "tests/testing/subprocess.h"
#include "tests/testing/thread_names.h"
#include "util/thread_role.h"

namespace sagad {
namespace {

// An operator's top -H tells the shards and the housekeeping apart; the
// timers have no thread of their own (each shard's loop keeps its own).
TEST(AsioExecutorTest, ItsThreadsAreNamedByRole) {
  AsioExecutor executor(2);
  auto named = [](const std::multiset<std::string>& names) {
    return names.count("sagad-shard-0") == 1 && names.count("sagad-shard-1") == 1 &&
           names.count("sagad-house-0") == 1 && names.count("sagad-house-1") == 1 &&
           names.count("sagad-timer") == 0;
  };
  // A thread names itself as it starts: wait for it, up to 5 s.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::multiset<std::string> names = ThreadNames();
  while (!named(names) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
    names = ThreadNames();
  }
  EXPECT_TRUE(named(names)) << "threads: " << ::testing::PrintToString(names);
}

TEST(AsioExecutorTest, AnOwnersTasksRunOnOneThreadOneAtATimeAndOnlyThereIsItTheOwner) {
  AsioExecutor executor(4);
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::atomic<int> running{0}, most{0}, ran{0}, off_owner{0};
  constexpr int kTasks = 2000;
  for (int i = 0; i < kTasks; ++i) {
    executor.PostTo("o1", [&] {
      most = std::max(most.load(), ++running);
      if (!executor.OnOwner("o1")) ++off_owner;
      if (CurrentThreadRole() != ThreadRole::kWorker) ++off_owner;
      {
        std::lock_guard<std::mutex> l(mu);
        threads.insert(std::this_thread::get_id());
      }
      --running;
      ++ran;
    });
  }
  ASSERT_TRUE(testing::WaitFor([&] { return ran == kTasks; }));
  EXPECT_EQ(most, 1);
  EXPECT_EQ(off_owner, 0);
  EXPECT_EQ(threads.size(), 1u);
  EXPECT_FALSE(executor.OnOwner("o1"));  // the test's thread is nobody's owner
}

TEST(AsioExecutorTest, AnotherOwnersThreadIsNotTheOwnerAndTimersReachTheOwner) {
  AsioExecutor executor(4);
  // Find an owner of another shard than o1's.
  std::string other;
  for (int i = 0; other.empty() && i < 1000; ++i) {
    std::string candidate = "x" + std::to_string(i);
    std::atomic<int> answer{-1};
    executor.PostTo("o1", [&] { answer = executor.OnOwner(candidate) ? 1 : 0; });
    ASSERT_TRUE(testing::WaitFor([&] { return answer >= 0; }));
    if (answer == 0) other = candidate;
  }
  ASSERT_FALSE(other.empty());
  std::atomic<int> timer{-1};
  executor.PostAfterTo(other, 5,
                       [&] { timer = executor.OnOwner(other) && !executor.OnOwner("o1") ? 1 : 0; });
  ASSERT_TRUE(testing::WaitFor([&] { return timer >= 0; }));
  EXPECT_EQ(timer, 1);
}

TEST(AsioExecutorTest, ShutdownRunsTheQueuedTasksAndNoTimerNotYetDue) {
  std::atomic<int> ran{0}, late{0};
  {
    AsioExecutor executor(2);
    for (int i = 0; i < 100; ++i) executor.PostTo("o" + std::to_string(i), [&] { ++ran; });
    executor.PostAfter(60000, [&] { ++late; });
    executor.Shutdown();
    EXPECT_EQ(ran, 100);
  }
  EXPECT_EQ(late, 0);
}

// A cancelled timer never runs and frees what its task holds at once, not
// when its time (an hour away) comes; one not cancelled fires on its owner.
// Timers are set and cancelled on their owner's thread.
TEST(AsioExecutorTest, ACancelledTimerNeverRunsAndFreesItsTaskAtOnce) {
  AsioExecutor executor(2);
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> watch = held;
  std::atomic<int> ran{0};
  // Runs `fn` on the owner of `owner` and waits for it.
  auto on = [&executor](const std::string& owner, std::function<void()> fn) {
    std::atomic<bool> done{false};
    executor.PostTo(owner, [&] {
      fn();
      done = true;
    });
    ASSERT_TRUE(testing::WaitFor([&] { return done.load(); }));
  };
  uint64_t far = 0, near = 0;
  on("a", [&] { far = executor.TimerTo("a", 3600 * 1000, [held, &ran] { ++ran; }); });
  held.reset();
  std::atomic<bool> near_on_owner{false};
  on("b", [&] { near = executor.TimerTo("b", 1, [&] { near_on_owner = executor.OnOwner("b"); }); });
  EXPECT_NE(far, 0u);
  EXPECT_NE(far, near);
  EXPECT_FALSE(watch.expired());
  on("a", [&] {
    executor.CancelTimer(far);
    executor.CancelTimer(far);  // twice: nothing
  });
  EXPECT_TRUE(testing::WaitFor([&] { return watch.expired() && near_on_owner.load(); }));
  EXPECT_EQ(executor.PendingTimers(), 0u);
  on("b", [&] { executor.CancelTimer(near); });  // fired already: nothing
  executor.Shutdown();
  EXPECT_EQ(ran, 0);
}

// A timer set on another thread than its owner's is a bug, stopped loudly.
TEST(AsioExecutorDeathTest, ATimerSetOffItsOwnersThreadIsRefused) {
  EXPECT_DEATH(
      {
        AsioExecutor executor(2);
        executor.TimerTo("a", 1000, [] {});
      },
      "off the owner's thread");
}

// A timer still armed at Shutdown never fires, and Shutdown does not wait
// for it.
TEST(AsioExecutorTest, ShutdownDisarmsTheTimersOfEveryShard) {
  std::atomic<int> late{0};
  {
    AsioExecutor executor(2);
    std::atomic<int> set{0};
    for (int i = 0; i < 20; ++i) {
      const std::string owner = "o" + std::to_string(i);
      executor.PostTo(owner, [&, owner] {
        executor.TimerTo(owner, 3600 * 1000, [&] { ++late; });
        ++set;
      });
      executor.PostAfterTo(owner, 3600 * 1000, [&] { ++late; });
    }
    ASSERT_TRUE(testing::WaitFor([&] { return set == 20; }));
    EXPECT_EQ(executor.PendingTimers(), 20u);
    executor.Shutdown();
    EXPECT_EQ(executor.PendingTimers(), 0u);
  }
  EXPECT_EQ(late, 0);
}

}  // namespace
}  // namespace sagad
