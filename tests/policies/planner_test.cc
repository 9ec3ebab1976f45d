#include "policies/planner.h"

#include <gtest/gtest.h>

#include "examples/examples.h"
#include "tests/testing/instance_events.h"

namespace sagad {
namespace {

class PlannerTest : public ::testing::Test, protected testing::InstanceEvents {
 protected:
  void SetUp() override {
    def_ = IncidentResponse();
    Create(def_, {{"title", "t"}});
  }
  Action Next() { return NextAction(def_, inst_); }

  SagaDefinition def_;
};

TEST_F(PlannerTest, ExecutesStepsInOrder) {
  EXPECT_EQ(Next().kind, ActionKind::kExecute);
  EXPECT_EQ(Next().step, 0);
  Step("create_ticket", StepEvent::kStart);
  EXPECT_EQ(Next().kind, ActionKind::kReconcile);  // STARTED after a restart: ask first
  Step("create_ticket", StepEvent::kCommit);
  EXPECT_EQ(Next().step, 1);
}

TEST_F(PlannerTest, IrreversibleStepWaitsForApproval) {
  for (const char* s : {"create_ticket", "isolate_host", "disable_account"}) {
    Step(s, StepEvent::kStart);
    Step(s, StepEvent::kCommit);
  }
  EXPECT_EQ(Next().kind, ActionKind::kRequestApproval);
  Step("notify_user", StepEvent::kRequestApproval);
  Saga(SagaEvent::kWaitForApproval);
  EXPECT_EQ(Next().kind, ActionKind::kNone);
  Step("notify_user", StepEvent::kApprove);
  Saga(SagaEvent::kResume);
  EXPECT_EQ(Next().kind, ActionKind::kExecute);
  Step("notify_user", StepEvent::kStart);
  Step("notify_user", StepEvent::kCommit);
  EXPECT_EQ(Next().kind, ActionKind::kComplete);
}

// Regression: the saga turned back while its irreversible step was in
// flight (a cancel accepted before the pivot rule, a deadline): the drain
// asks first, and once the pivot committed the saga goes forward, never to
// COMPENSATED.
TEST_F(PlannerTest, APivotThatCommitsDuringTheDrainMakesTheSagaGoForward) {
  for (const char* s : {"create_ticket", "isolate_host", "disable_account"}) {
    Step(s, StepEvent::kStart);
    Step(s, StepEvent::kCommit);
  }
  EXPECT_EQ(PivotInPlay(def_, inst_), -1);
  Step("notify_user", StepEvent::kRequestApproval);
  Step("notify_user", StepEvent::kApprove);
  EXPECT_EQ(PivotInPlay(def_, inst_), -1);  // approved is not sent
  Step("notify_user", StepEvent::kStart);
  EXPECT_EQ(PivotInPlay(def_, inst_), 3);
  Saga(SagaEvent::kStartCompensation);
  EXPECT_EQ(Next().kind, ActionKind::kReconcile);  // drained first
  EXPECT_EQ(Next().step, 3);
  Step("notify_user", StepEvent::kCommit);
  EXPECT_EQ(Next().kind, ActionKind::kGoForward);
  EXPECT_EQ(Next().step, 3);
  Saga(SagaEvent::kResume);  // COMPENSATING -> RUNNING
  EXPECT_EQ(inst_.status(), SagaStatus::kRunning);
  EXPECT_EQ(Next().kind, ActionKind::kComplete);
}

TEST_F(PlannerTest, CompensatesCommittedStepsInReverseOrder) {
  Step("create_ticket", StepEvent::kStart);
  Step("create_ticket", StepEvent::kCommit);
  Step("isolate_host", StepEvent::kStart);
  Step("isolate_host", StepEvent::kCommit);
  Step("disable_account", StepEvent::kStart);
  Step("disable_account", StepEvent::kFail);
  Saga(SagaEvent::kStartCompensation);
  EXPECT_EQ(Next().kind, ActionKind::kCompensate);
  EXPECT_EQ(Next().step, 1);
  Step("isolate_host", StepEvent::kBeginCompensation);
  EXPECT_EQ(Next().kind, ActionKind::kReconcileCompensation);
  Step("isolate_host", StepEvent::kCompensationDone);
  EXPECT_EQ(Next().step, 0);
  Step("create_ticket", StepEvent::kBeginCompensation);
  Step("create_ticket", StepEvent::kCompensationDone);
  EXPECT_EQ(Next().kind, ActionKind::kFinishCompensation);
}

// Found by the simulator (seed 551963): a step whose forward outcome is in
// review may have happened; what it depends on is not undone before a human
// says (else the undo order would be broken if it did happen).
TEST_F(PlannerTest, AStepInReviewHoldsUpTheUndoOfWhatItDependsOn) {
  Step("create_ticket", StepEvent::kStart);
  Step("create_ticket", StepEvent::kCommit);
  Step("isolate_host", StepEvent::kStart);
  Step("isolate_host", StepEvent::kOutcomeUnknown);
  Step("isolate_host", StepEvent::kEscalate);
  Saga(SagaEvent::kStartCompensation);
  EXPECT_EQ(Next().kind, ActionKind::kEscalate);
  EXPECT_EQ(Next().step, 1);
  Step("isolate_host", StepEvent::kCommit);  // an operator: it happened
  EXPECT_EQ(Next().kind, ActionKind::kCompensate);
  EXPECT_EQ(Next().step, 1);  // undone first
}

// Regression: a step an operator skipped before it was ever sent took no
// effect; turning back never undoes it. One skipped after a send (its
// outcome in review) is undone like any committed step.
TEST_F(PlannerTest, AStepSkippedBeforeItWasSentIsNeverUndone) {
  Step("create_ticket", StepEvent::kStart);
  Step("create_ticket", StepEvent::kCommit);
  Step("isolate_host", StepEvent::kSkip);  // never sent
  Step("disable_account", StepEvent::kStart);
  Step("disable_account", StepEvent::kFail);
  Saga(SagaEvent::kStartCompensation);
  EXPECT_EQ(Next().kind, ActionKind::kCompensate);
  EXPECT_EQ(Next().step, 0);  // isolate_host is passed over
  Step("create_ticket", StepEvent::kBeginCompensation);
  Step("create_ticket", StepEvent::kCompensationDone);
  EXPECT_EQ(Next().kind, ActionKind::kFinishCompensation);
}

TEST_F(PlannerTest, AStepSkippedAfterASendIsUndoneLikeAnyCommittedStep) {
  Step("create_ticket", StepEvent::kStart);
  Step("create_ticket", StepEvent::kCommit);
  Step("isolate_host", StepEvent::kStart);
  Step("isolate_host", StepEvent::kOutcomeUnknown);
  Step("isolate_host", StepEvent::kEscalate);
  Step("isolate_host", StepEvent::kSkip);  // in review: it may have happened
  Step("disable_account", StepEvent::kStart);
  Step("disable_account", StepEvent::kFail);
  Saga(SagaEvent::kStartCompensation);
  EXPECT_EQ(Next().kind, ActionKind::kCompensate);
  EXPECT_EQ(Next().step, 1);
}

TEST_F(PlannerTest, ReplayRebuildsTheSameState) {
  Step("create_ticket", StepEvent::kStart);
  Step("create_ticket", StepEvent::kOutcomeUnknown);
  Step("create_ticket", StepEvent::kCommit);
  std::vector<Event> log;
  Instance fresh;
  Event created = Instance::CreatedEvent("i1", def_, {{"title", "t"}});
  created.seq = 1;
  log.push_back(created);
  int64_t seq = 1;
  for (const char* t : {"started", "outcome_unknown", "committed"}) {
    Event e;
    e.seq = ++seq;
    e.type = t;
    e.step = "create_ticket";
    log.push_back(e);
  }
  auto replayed = Instance::Replay("i1", def_, log);
  ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
  EXPECT_EQ(replayed->ToJson(), inst_.ToJson());
}

TEST_F(PlannerTest, ReplayRejectsAnImpossibleHistory) {
  std::vector<Event> log;
  Event created = Instance::CreatedEvent("i1", def_, {{"title", "t"}});
  created.seq = 1;
  log.push_back(created);
  Event e;
  e.seq = 2;
  e.type = "committed";  // committed without ever starting
  e.step = "create_ticket";
  log.push_back(e);
  EXPECT_FALSE(Instance::Replay("i1", def_, log).ok());
}

}  // namespace
}  // namespace sagad
