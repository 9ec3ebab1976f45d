#include "coordinator/engine/instances/saga_turns.h"

#include <gtest/gtest.h>

#include "tests/coordinator/engine/turns_fixture.h"

namespace sagad {
namespace {

using SagaTurnsTest = testing::TurnsFixture;

TEST_F(SagaTurnsTest, GivingUpBeforeThePivotCompensates) {
  Commit(0, "r-1");
  Tx tx(inst_, 2000);
  ASSERT_TRUE(GiveUp(tx, def_, "step 'charge' failed").ok());
  EXPECT_EQ(inst_.status(), SagaStatus::kCompensating);
  ASSERT_EQ(tx.events().size(), 1u);
  EXPECT_EQ(tx.events()[0].data.value("reason", ""), "step 'charge' failed");
}

TEST_F(SagaTurnsTest, GivingUpOnceThePivotStartedGoesToReviewNamingIt) {
  Commit(0, "r-1");
  Tx start(inst_, 2000);
  ASSERT_TRUE(start.Step(1, StepEvent::kStart, {{"key", "i1:charge"}}).ok());
  Tx tx(inst_, 3000);
  ASSERT_TRUE(GiveUp(tx, def_, "deadline").ok());
  EXPECT_EQ(inst_.status(), SagaStatus::kNeedsReview);
  EXPECT_EQ(inst_.review_reason(), "deadline after the irreversible step 'charge' started");
}

TEST_F(SagaTurnsTest, GivingUpIsANoOpUnlessRunning) {
  Tx tx(inst_, 2000);
  ASSERT_TRUE(tx.Saga(SagaEvent::kEscalate, {{"reason", "r"}}).ok());
  ASSERT_TRUE(GiveUp(tx, def_, "late").ok());
  EXPECT_EQ(inst_.status(), SagaStatus::kNeedsReview);
  EXPECT_EQ(tx.events().size(), 1u);
}

TEST_F(SagaTurnsTest, GoingForwardIsOnlyForADrainWhosePivotCommitted) {
  Tx tx(inst_, 2000);
  EXPECT_EQ(GoForward(tx, def_).code(), StatusCode::kMovedOn);  // not compensating
  Commit(0, "r-1");
  Tx start(inst_, 2000);
  ASSERT_TRUE(start.Step(1, StepEvent::kStart, {{"key", "i1:charge"}}).ok());
  ASSERT_TRUE(start.Saga(SagaEvent::kStartCompensation, {{"reason", "cancel"}}).ok());
  ASSERT_TRUE(start.Step(1, StepEvent::kCommit, {{"external_ref", "c-1"}}).ok());
  Tx forward(inst_, 3000);
  ASSERT_TRUE(GoForward(forward, def_).ok());
  EXPECT_EQ(inst_.status(), SagaStatus::kRunning);
}

TEST_F(SagaTurnsTest, EscalatingAStepPutsItAndTheSagaInReview) {
  Tx start(inst_, 2000);
  ASSERT_TRUE(start.Step(0, StepEvent::kStart, {{"key", "i1:reserve"}}).ok());
  ASSERT_TRUE(EscalateStep(start, 0, "nobody can tell").ok());
  EXPECT_EQ(inst_.step(0).status(), StepStatus::kNeedsReview);
  EXPECT_EQ(inst_.step(0).last_error, "nobody can tell");
  EXPECT_EQ(inst_.status(), SagaStatus::kNeedsReview);
  // Again: nothing more to record.
  size_t n = start.events().size();
  ASSERT_TRUE(EscalateStep(start, 0, "still").ok());
  EXPECT_EQ(start.events().size(), n);
}

}  // namespace
}  // namespace sagad
