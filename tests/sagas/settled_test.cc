// The one table of what a status means to a waiter, an answer and a guard
// (sagas/settled.h), row by row: the documented 200/202 of a run's call,
// when a ?wait ends, what a guard counts.
#include "sagas/settled.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sagad {
namespace {

struct Row {
  std::string status;
  bool settled, decided, answered, counted;
};

TEST(SettledTest, EachCallStatusMeansWhatTheTableSays) {
  const std::vector<Row> rows = {
      {"PLANNED", false, false, false, true},
      {"STARTED", false, false, false, true},
      {"UNKNOWN", false, false, false, true},
      {"AWAITING_APPROVAL", false, false, true, true},
      {"COMMITTED", true, true, true, true},
      {"FAILED", true, true, true, false},
      {"REJECTED", true, true, true, false},
      {"COMPENSATING", false, false, true, true},
      {"COMPENSATED", false, true, true, false},
      {"NEEDS_REVIEW", false, true, true, true},
      {"CANCELLED", false, true, true, false},
      // A name no sagad writes: a wait goes on, a guard counts it.
      {"NO_SUCH_STATUS", false, false, false, true},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(CallSettledName(r.status), r.settled) << r.status;
    EXPECT_EQ(CallDecided(r.status), r.decided) << r.status;
    EXPECT_EQ(CallAnswered(r.status), r.answered) << r.status;
    EXPECT_EQ(CallCounted(r.status), r.counted) << r.status;
  }
}

TEST(SettledTest, TheMachinesStatusesReadTheSameRowAsTheirNames) {
  for (StepStatus s :
       {StepStatus::kPlanned, StepStatus::kAwaitingApproval, StepStatus::kStarted,
        StepStatus::kCommitted, StepStatus::kFailed, StepStatus::kUnknown, StepStatus::kRejected,
        StepStatus::kCompensating, StepStatus::kCompensated, StepStatus::kNeedsReview})
    EXPECT_EQ(CallSettled(s), CallSettledName(StepStatusName(s))) << StepStatusName(s);
  for (SagaStatus s :
       {SagaStatus::kRunning, SagaStatus::kAwaitingApproval, SagaStatus::kCompleted,
        SagaStatus::kCompensating, SagaStatus::kCompensated, SagaStatus::kNeedsReview}) {
    EXPECT_EQ(SagaSettled(s), SagaSettledName(SagaStatusName(s))) << SagaStatusName(s);
    EXPECT_EQ(SagaDecided(s), SagaDecidedName(SagaStatusName(s))) << SagaStatusName(s);
  }
}

TEST(SettledTest, AnInstanceIsSettledWhenItWaitsForSomeoneElseOrEnded) {
  EXPECT_FALSE(SagaSettled(SagaStatus::kRunning));
  EXPECT_FALSE(SagaSettled(SagaStatus::kCompensating));
  EXPECT_TRUE(SagaSettled(SagaStatus::kAwaitingApproval));
  EXPECT_TRUE(SagaSettled(SagaStatus::kCompleted));
  EXPECT_TRUE(SagaSettled(SagaStatus::kCompensated));
  EXPECT_TRUE(SagaSettled(SagaStatus::kNeedsReview));
  // Decided: nothing changes unless someone acts; an approval is awaited.
  EXPECT_FALSE(SagaDecided(SagaStatus::kAwaitingApproval));
  EXPECT_TRUE(SagaDecided(SagaStatus::kNeedsReview));
  // A run's OPEN is settled by its calls, never by its name alone.
  EXPECT_FALSE(SagaSettledName("OPEN"));
}

}  // namespace
}  // namespace sagad
