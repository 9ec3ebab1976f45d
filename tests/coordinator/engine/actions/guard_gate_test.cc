// GuardGate: the appends of one key run one at a time, in the order asked
// for, each on the housekeeping (never on an owner); other keys do not wait.
#include "coordinator/engine/actions/guard_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "coordinator/engine/owners/asio_executor.h"
#include "tests/testing/subprocess.h"
#include "util/thread_role.h"

namespace sagad {
namespace {

TEST(GuardGateTest, OneKeyRunsOneAtATimeInOrderAndOtherKeysDoNotWait) {
  AsioExecutor executor(2);
  GuardGate gate(executor);
  std::mutex mu;
  std::vector<int> order;
  std::vector<Task> releases(3);
  std::atomic<int> started{0}, on_worker{0};
  for (int i = 0; i < 3; ++i)
    gate.Run("tools\nalice", [&, i](Task release) {
      if (CurrentThreadRole() == ThreadRole::kWorker) ++on_worker;
      std::lock_guard<std::mutex> l(mu);
      order.push_back(i);
      releases[i] = std::move(release);
      ++started;
    });
  ASSERT_TRUE(testing::WaitFor([&] { return started == 1; }));
  // Another principal's append runs while alice's first holds the gate.
  std::atomic<bool> bob{false};
  gate.Run("tools\nbob", [&](Task release) {
    bob = true;
    release();
  });
  ASSERT_TRUE(testing::WaitFor([&] { return bob.load(); }));
  EXPECT_EQ(started, 1);  // alice's second still waits for the first
  for (int i = 0; i < 3; ++i) {
    Task r;
    {
      std::lock_guard<std::mutex> l(mu);
      r = releases[i];
    }
    r();  // from the test's thread: any thread may release
    if (i < 2) {
      ASSERT_TRUE(testing::WaitFor([&, i] { return started == i + 2; }));
    }
  }
  executor.Shutdown();  // the last release's task runs while the gate exists
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(on_worker, 0);
}

}  // namespace
}  // namespace sagad
