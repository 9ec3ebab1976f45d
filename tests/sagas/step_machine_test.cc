#include "sagas/step_machine.h"

#include <gtest/gtest.h>

#include "sagas/saga_machine.h"

namespace sagad {
namespace {

StepMachine Through(std::initializer_list<StepEvent> events) {
  StepMachine m;
  for (StepEvent e : events) EXPECT_TRUE(m.Process(e).ok()) << StepEventName(e);
  return m;
}

TEST(StepMachineTest, ForwardPathReachesCommitted) {
  auto m = Through({StepEvent::kStart, StepEvent::kCommit});
  EXPECT_EQ(m.status(), StepStatus::kCommitted);
}

TEST(StepMachineTest, ApprovalGatesTheStart) {
  auto m = Through({StepEvent::kRequestApproval});
  EXPECT_EQ(m.status(), StepStatus::kAwaitingApproval);
  EXPECT_FALSE(m.Process(StepEvent::kStart).ok());
  EXPECT_TRUE(m.Process(StepEvent::kApprove).ok());
  EXPECT_TRUE(m.approved());
  EXPECT_TRUE(m.Process(StepEvent::kStart).ok());
}

TEST(StepMachineTest, UnknownIsNeverFailedAndResolvesByReconciliation) {
  auto m = Through({StepEvent::kStart, StepEvent::kOutcomeUnknown});
  EXPECT_EQ(m.status(), StepStatus::kUnknown);
  EXPECT_FALSE(m.Process(StepEvent::kFail).ok());
  EXPECT_EQ(m.status(), StepStatus::kUnknown);
  EXPECT_TRUE(m.Process(StepEvent::kStart).ok());  // confirmed not executed: same key again
  EXPECT_TRUE(m.Process(StepEvent::kOutcomeUnknown).ok());
  EXPECT_TRUE(m.Process(StepEvent::kCommit).ok());  // downstream confirms
}

TEST(StepMachineTest, OnlyADownstreamsConfirmedRefusalTurnsUnknownIntoFailed) {
  auto m = Through({StepEvent::kStart, StepEvent::kOutcomeUnknown});
  EXPECT_TRUE(m.Process(StepEvent::kConfirmRefused).ok());
  EXPECT_EQ(m.status(), StepStatus::kFailed);
  auto c = Through({StepEvent::kStart, StepEvent::kCommit});
  EXPECT_FALSE(c.Process(StepEvent::kConfirmRefused).ok());  // committed stays committed
}

TEST(StepMachineTest, CommittedStepCannotStartAgain) {
  auto m = Through({StepEvent::kStart, StepEvent::kCommit});
  EXPECT_FALSE(m.Process(StepEvent::kStart).ok());
  EXPECT_EQ(m.status(), StepStatus::kCommitted);
}

TEST(StepMachineTest, CompensationIsOnlyDoneWhenConfirmed) {
  auto m = Through({StepEvent::kStart, StepEvent::kCommit, StepEvent::kBeginCompensation,
                    StepEvent::kCompensationUnknown});
  EXPECT_EQ(m.status(), StepStatus::kCompensating);
  EXPECT_TRUE(m.compensation_in_doubt());
  EXPECT_TRUE(m.Process(StepEvent::kEscalate).ok());
  EXPECT_EQ(m.status(), StepStatus::kNeedsReview);
  EXPECT_TRUE(m.reviewing_compensation());
  EXPECT_TRUE(m.Process(StepEvent::kCompensationDone).ok());
  EXPECT_EQ(m.status(), StepStatus::kCompensated);
}

TEST(StepMachineTest, PlannedStepCannotBeCompensated) {
  StepMachine m;
  EXPECT_FALSE(m.Process(StepEvent::kBeginCompensation).ok());
  EXPECT_FALSE(m.Process(StepEvent::kCompensationDone).ok());
}

TEST(StepMachineTest, CopiesAreIndependent) {
  auto a = Through({StepEvent::kStart});
  StepMachine b = a;
  ASSERT_TRUE(b.Process(StepEvent::kCommit).ok());
  EXPECT_EQ(a.status(), StepStatus::kStarted);
  EXPECT_EQ(b.status(), StepStatus::kCommitted);
}

TEST(SagaMachineTest, FollowsTheDesignedLifecycle) {
  SagaMachine m;
  EXPECT_EQ(m.status(), SagaStatus::kRunning);
  ASSERT_TRUE(m.Process(SagaEvent::kWaitForApproval).ok());
  ASSERT_TRUE(m.Process(SagaEvent::kStartCompensation).ok());
  EXPECT_FALSE(m.Process(SagaEvent::kComplete).ok());
  ASSERT_TRUE(m.Process(SagaEvent::kEscalate).ok());
  EXPECT_EQ(m.status(), SagaStatus::kNeedsReview);
  ASSERT_TRUE(m.Process(SagaEvent::kResume).ok());
  EXPECT_EQ(m.status(), SagaStatus::kCompensating);  // resumes where it was
  ASSERT_TRUE(m.Process(SagaEvent::kFinishCompensation).ok());
  EXPECT_TRUE(IsTerminal(m.status()));
  EXPECT_FALSE(m.Process(SagaEvent::kResume).ok());
}

}  // namespace
}  // namespace sagad
