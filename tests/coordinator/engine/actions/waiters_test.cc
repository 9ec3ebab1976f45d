// Waiters over a real LMDB store: `?wait=` callers, blocking and asynchronous.
#include "coordinator/engine/actions/waiters.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "coordinator/engine/owners/asio_executor.h"
#include "tests/testing/store_fixture.h"

namespace sagad {
namespace {

class WaitersTest : public testing::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    Event e;
    e.seq = 1;
    e.type = "instance_created";
    ASSERT_TRUE(store_->CreateInstance(Snap("RUNNING"), {e}, nullptr, {}, nullptr).ok());
    waiters_ = std::make_unique<Waiters>(*store_, executor_, clock_);
  }
  // The timers and readers stop before the waiters go: their handlers
  // point at them (as Engine::Impl::Stop does it).
  void TearDown() override {
    executor_.Shutdown();
    CloseStore();
    waiters_.reset();
  }
  static nlohmann::json Snap(const std::string& status) {
    return {{"id", "w1"}, {"version", 1}, {"status", status}, {"saga", "s"}};
  }
  std::shared_ptr<const nlohmann::json> Settled() {
    return std::make_shared<const nlohmann::json>(Snap("COMPLETED"));
  }

  AsioExecutor executor_{1};
  SystemClock clock_;
  std::unique_ptr<Waiters> waiters_;
};

TEST_F(WaitersTest, SettledMeansNothingMoreFromTheEngineForNow) {
  EXPECT_TRUE(Waiters::Settled(Snap("COMPLETED")));
  EXPECT_TRUE(Waiters::Settled(Snap("NEEDS_REVIEW")));
  EXPECT_TRUE(Waiters::Settled(Snap("AWAITING_APPROVAL")));
  EXPECT_FALSE(Waiters::Settled(Snap("RUNNING")));
  EXPECT_FALSE(Waiters::Settled(Snap("COMPENSATING")));
}

// ?until=decided: AWAITING_APPROVAL settles a wait but decides nothing; a
// waiter with its own condition is woken by a commit that does not settle
// the instance, and only when its condition holds.
TEST_F(WaitersTest, AWaiterUntilDecidedHoldsPastAnApprovalAndWakesOnTheDecision) {
  nlohmann::json run = {{"id", "r1"},
                        {"version", 1},
                        {"saga", "s"},
                        {"kind", "run"},
                        {"status", "AWAITING_APPROVAL"},
                        {"calls",
                         {{{"call_id", "a"}, {"status", "AWAITING_APPROVAL"}},
                          {{"call_id", "b"}, {"status", "STARTED"}}}}};
  EXPECT_FALSE(Waiters::Decided(run));
  EXPECT_FALSE(Waiters::CallDecided("a")(run));
  Event e;
  e.seq = 1;
  e.type = "instance_created";
  ASSERT_TRUE(store_->CreateInstance(run, {e}, nullptr, {}, nullptr).ok());
  std::promise<nlohmann::json> got;
  waiters_->WaitAsync(
      "r1", std::chrono::seconds(30), [&](StatusOr<nlohmann::json> j) { got.set_value(*j); },
      Waiters::CallDecided("a"));
  auto view = [&run] { return std::make_shared<const nlohmann::json>(run); };
  run["status"] = "OPEN";
  run["calls"][1]["status"] = "COMMITTED";  // the other call: not this waiter's
  waiters_->Notify("r1", false, view);
  auto fut = got.get_future();
  EXPECT_EQ(fut.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  run["calls"][0]["status"] = "REJECTED";  // the operator decided
  EXPECT_TRUE(Waiters::Decided(run));
  waiters_->Notify("r1", true, view);
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(fut.get()["calls"][0]["status"], "REJECTED");
}

TEST_F(WaitersTest, AWaitOnNoInstanceIsAnsweredNotFound) {
  std::promise<StatusCode> answer;
  waiters_->WaitAsync("nope", std::chrono::milliseconds(50),
                      [&](StatusOr<nlohmann::json> j) { answer.set_value(j.status().code()); });
  auto fut = answer.get_future();
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(fut.get(), StatusCode::kNotFound);
}

TEST_F(WaitersTest, AnAsynchronousWaitIsAnsweredOnceAndThenCannotBeDropped) {
  std::promise<std::string> answer;
  std::atomic<int> calls{0};
  auto drop = waiters_->WaitAsync("w1", std::chrono::seconds(30), [&](StatusOr<nlohmann::json> j) {
    if (calls++ == 0) answer.set_value(j->value("status", ""));
  });
  waiters_->Notify("w1", true, [this] { return Settled(); });
  waiters_->Notify("w1", true, [this] { return Settled(); });
  EXPECT_EQ(answer.get_future().get(), "COMPLETED");
  EXPECT_FALSE(drop());  // it ran
  EXPECT_EQ(calls, 1);
}

TEST_F(WaitersTest, ADroppedWaitIsNeverAnswered) {
  std::atomic<int> calls{0};
  auto drop = waiters_->WaitAsync("w1", std::chrono::seconds(30),
                                  [&](StatusOr<nlohmann::json>) { ++calls; });
  EXPECT_TRUE(drop());
  waiters_->Notify("w1", true, [this] { return Settled(); });
  EXPECT_EQ(calls, 0);
}

TEST_F(WaitersTest, AnAsynchronousWaitTimesOutWithTheStoredView) {
  std::promise<std::string> answer;
  waiters_->WaitAsync("w1", std::chrono::milliseconds(20), [&](StatusOr<nlohmann::json> j) {
    answer.set_value(j.ok() ? j->value("status", "") : j.status().ToString());
  });
  auto f = answer.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(f.get(), "RUNNING");
}

TEST_F(WaitersTest, FinishAllAnswersEveryWaiterAndEveryLaterOneWithItsStatus) {
  std::promise<StatusCode> first, later;
  waiters_->WaitAsync("w1", std::chrono::seconds(30),
                      [&](StatusOr<nlohmann::json> j) { first.set_value(j.status().code()); });
  waiters_->FinishAll(Unavailable("draining"));
  EXPECT_EQ(first.get_future().get(), StatusCode::kUnavailable);
  waiters_->WaitAsync("w1", std::chrono::seconds(30),
                      [&](StatusOr<nlohmann::json> j) { later.set_value(j.status().code()); });
  EXPECT_EQ(later.get_future().get(), StatusCode::kUnavailable);
}

TEST_F(WaitersTest, AfterCancelAllNoWaiterIsAnswered) {
  std::atomic<int> calls{0};
  waiters_->WaitAsync("w1", std::chrono::seconds(30), [&](StatusOr<nlohmann::json>) { ++calls; });
  waiters_->CancelAll();
  waiters_->Notify("w1", true, [this] { return Settled(); });
  waiters_->WaitAsync("w1", std::chrono::seconds(30), [&](StatusOr<nlohmann::json>) { ++calls; });
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace sagad
