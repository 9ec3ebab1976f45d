// StepAction: what an action in flight holds (its step's mark, the
// service's permit, the caller's `done`) and when each goes.
#include "coordinator/engine/steps/step_action.h"

#include <gtest/gtest.h>

#include <memory>

#include "coordinator/engine/instances/run_table.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/service_configs.h"

namespace sagad {
namespace {

class StepActionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    configs_.services["one"].max_in_flight = 1;
    auto def = std::make_shared<SagaDefinition>();
    def->name = "two_steps";
    def->steps.resize(2);
    def->steps[0].name = "reserve";
    def->steps[1].name = "charge";
    def_ = def;
  }
  // Whether step i of "a" is free (a mark could be taken now; given back).
  bool Free(int i) { return static_cast<bool>(runs_.TryMarkStep("a", i, 8)); }
  std::shared_ptr<StepAction> Make(int step, std::vector<Next>* ends) {
    auto mark = std::make_shared<StepMark>(runs_.TryMarkStep("a", step, 8));
    return std::make_shared<StepAction>("a", def_, step, mark, TraceContext{},
                                        [ends](Next n) { ends->push_back(n); });
  }
  std::optional<ServiceGates::Permit> Take() {
    int64_t retry_ms = 0;
    return gates_.TryAcquire("one", "a", "reserve", &retry_ms);
  }

  RunTable runs_;
  testing::ServiceConfigs configs_;
  testing::ManualClock clock_;
  ServiceGates gates_{configs_, clock_};
  SagaDefinitionPtr def_;
};

TEST_F(StepActionTest, EndsOnceThePermitFirstThenDoneThenTheMark) {
  std::vector<Next> ends;
  bool held_during_done = false;
  bool slot_free_during_done = false;
  auto mark = std::make_shared<StepMark>(runs_.TryMarkStep("a", 0, 8));
  auto a = std::make_shared<StepAction>("a", def_, 0, mark, TraceContext{}, [&](Next n) {
    ends.push_back(n);
    held_during_done = !Free(0);
    slot_free_during_done = static_cast<bool>(Take());
  });
  a->Begin(StepAction::Phase::kSend, "a:reserve", 1);
  a->Hold(*Take());
  EXPECT_FALSE(Take());  // the one slot is the action's
  a->End(Next::kContinue);
  EXPECT_TRUE(held_during_done);       // `done` may still rely on the mark
  EXPECT_TRUE(slot_free_during_done);  // the permit went before
  EXPECT_TRUE(Free(0));                // and the mark after
  a->End(Next::kStop);                 // once only
  EXPECT_EQ(ends, std::vector<Next>{Next::kContinue});
  EXPECT_TRUE(a->ended());
}

TEST_F(StepActionTest, MovingOnLetsGoOfTheRecordedStepAndHoldsTheChainedOne) {
  std::vector<Next> ends;
  auto a = Make(0, &ends);
  a->Begin(StepAction::Phase::kSend, "a:reserve", 2);
  a->Hold(*Take());
  StepAction::MarkPtr callers = a->mark();  // the driver shares it (Driver::StepEnd)
  a->MoveOn(def_, runs_.TryMarkStep("a", 1, 8));
  EXPECT_EQ(a->step(), 1);
  EXPECT_EQ(a->step_def().name, "charge");
  EXPECT_TRUE(Free(0));  // the recorded step's mark went, though its caller shares it
  EXPECT_FALSE(callers->held());
  EXPECT_FALSE(Free(1));  // the chained step's is held
  EXPECT_TRUE(Take());    // chained sends hold no permit
  a->End(Next::kContinue);
  EXPECT_TRUE(Free(1));
  EXPECT_EQ(ends.size(), 1u);
}

TEST_F(StepActionTest, DroppedWithoutEndingWhatItHoldsGoesWithIt) {
  std::vector<Next> ends;
  {
    auto a = Make(0, &ends);
    a->Hold(*Take());
  }
  EXPECT_TRUE(ends.empty());
  EXPECT_TRUE(Free(0));
  EXPECT_TRUE(Take());
}

TEST_F(StepActionTest, AnActionWithoutItsStepsMarkAborts) {
  auto other = std::make_shared<StepMark>(runs_.TryMarkStep("a", 1, 8));
  EXPECT_DEATH(StepAction("a", def_, 0, other, TraceContext{}, [](Next) {}),
               "step 0: an action without the step's mark");
  std::vector<Next> ends;
  auto a = Make(0, &ends);
  EXPECT_DEATH(a->MoveOn(def_, StepMark()), "a chained send without the step's mark");
}

}  // namespace
}  // namespace sagad
