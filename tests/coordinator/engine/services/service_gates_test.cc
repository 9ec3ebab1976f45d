// ServiceGates with a manual clock: pause, max_in_flight, max_per_second,
// who waits, and who is woken.
#include "coordinator/engine/services/service_gates.h"

#include <gtest/gtest.h>

#include "tests/testing/manual_clock.h"
#include "tests/testing/service_configs.h"

namespace sagad {
namespace {

class ServiceGatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    configs_.services["free"].name = "free";
    configs_.services["two"].max_in_flight = 2;
    configs_.services["slow"].max_per_second = 2;
    gates_.SetWake([this](const std::string& id) { woken_.push_back(id); });
  }
  std::optional<ServiceGates::Permit> Take(const std::string& service, const std::string& id,
                                           int64_t* retry_ms = nullptr) {
    int64_t ignored = 0;
    return gates_.TryAcquire(service, id, "step", retry_ms ? retry_ms : &ignored);
  }
  const ServiceGates::View* View(const std::string& name) {
    views_ = gates_.Views();
    for (const auto& v : views_)
      if (v.name == name) return &v;
    return nullptr;
  }

  testing::ServiceConfigs configs_;
  testing::ManualClock clock_;
  ServiceGates gates_{configs_, clock_};
  std::vector<std::string> woken_;
  std::vector<ServiceGates::View> views_;
};

TEST_F(ServiceGatesTest, AnUnlimitedServiceIsOpenAndAlwaysGivesAPermit) {
  EXPECT_TRUE(gates_.Open("free"));
  EXPECT_FALSE(gates_.Open("two"));
  EXPECT_FALSE(gates_.Open("slow"));
  std::vector<ServiceGates::Permit> held;
  for (int i = 0; i < 100; ++i) {
    auto p = Take("free", "i" + std::to_string(i));
    ASSERT_TRUE(p);
    held.push_back(std::move(*p));
  }
}

TEST_F(ServiceGatesTest, MaxInFlightHoldsTheThirdUntilOneEndsAndWakesIt) {
  auto a = Take("two", "a");
  auto b = Take("two", "b");
  ASSERT_TRUE(a && b);
  int64_t retry = 0;
  EXPECT_FALSE(Take("two", "c", &retry));
  EXPECT_GT(retry, 0);
  EXPECT_EQ(gates_.WaitingFor("c", "step"), "two");
  EXPECT_EQ(View("two")->queued, 1);
  a->Release();
  EXPECT_EQ(woken_, std::vector<std::string>{"c"});
  auto c = Take("two", "c");
  ASSERT_TRUE(c);
  EXPECT_EQ(gates_.WaitingFor("c", "step"), "");
  EXPECT_EQ(View("two")->queued, 0);
  a.reset();  // released already: nothing more to give back
  EXPECT_FALSE(Take("two", "d"));
}

TEST_F(ServiceGatesTest, APermitIsGivenBackWhenDestroyedOrMoved) {
  {
    auto a = Take("two", "a");
    auto b = Take("two", "b");
    ASSERT_TRUE(a && b);
    ServiceGates::Permit moved = std::move(*a);
    EXPECT_FALSE(Take("two", "x"));
  }
  EXPECT_TRUE(Take("two", "y"));
}

TEST_F(ServiceGatesTest, MaxPerSecondIsATokenBucketOfOneSecond) {
  EXPECT_TRUE(Take("slow", "a"));
  EXPECT_TRUE(Take("slow", "b"));
  int64_t retry = 0;
  EXPECT_FALSE(Take("slow", "c", &retry));
  EXPECT_EQ(retry, 500);  // one token every 500 ms
  clock_.Advance(499);
  EXPECT_FALSE(Take("slow", "c", &retry));
  EXPECT_EQ(retry, 1);
  clock_.Advance(1);
  EXPECT_TRUE(Take("slow", "c"));
  clock_.Advance(10000);  // idle: at most one second's worth is saved up
  EXPECT_TRUE(Take("slow", "d"));
  EXPECT_TRUE(Take("slow", "e"));
  EXPECT_FALSE(Take("slow", "f"));
}

TEST_F(ServiceGatesTest, APauseHoldsEveryNewSendAndAResumeWakesTheWaiters) {
  gates_.Pause("free", true);
  EXPECT_FALSE(gates_.Open("free"));
  int64_t retry = 0;
  EXPECT_FALSE(Take("free", "a", &retry));
  EXPECT_EQ(retry, 1000);
  EXPECT_FALSE(Take("free", "b"));
  EXPECT_TRUE(View("free")->paused);
  EXPECT_EQ(View("free")->queued, 2);
  gates_.Pause("free", false);
  std::sort(woken_.begin(), woken_.end());
  EXPECT_EQ(woken_, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(Take("free", "a"));
}

TEST_F(ServiceGatesTest, ThePausedSetFromTheStoreReplacesWhatWasKnown) {
  gates_.SetPaused({"free", "two"});
  EXPECT_TRUE(gates_.Paused("free"));
  EXPECT_TRUE(gates_.Paused("two"));
  gates_.SetPaused({"two"});
  EXPECT_FALSE(gates_.Paused("free"));
  EXPECT_TRUE(gates_.Paused("two"));
  gates_.SetPaused({"gone"});  // a paused name no longer configured is still listed
  EXPECT_NE(View("gone"), nullptr);
  EXPECT_TRUE(View("gone")->paused);
}

TEST_F(ServiceGatesTest, AStepThatStopsAskingIsForgotten) {
  gates_.Pause("free", true);
  EXPECT_FALSE(Take("free", "a"));
  clock_.Advance(10001);
  EXPECT_EQ(gates_.WaitingFor("a", "step"), "");
  EXPECT_EQ(View("free")->queued, 0);
}

TEST_F(ServiceGatesTest, CallsUnderWayAreCountedForEveryService) {
  gates_.CallStarted("free");
  gates_.CallStarted("free");
  gates_.CallEnded("free");
  EXPECT_EQ(View("free")->in_flight, 1);
  EXPECT_EQ(View("two")->max_in_flight, 2);
  EXPECT_EQ(View("slow")->max_per_second, 2);
}

}  // namespace
}  // namespace sagad
