#include <gtest/gtest.h>

#include <random>

#include "policies/approval_policy.h"
#include "policies/failure_policy.h"
#include "policies/retry_budget.h"
#include "policies/retry_policy.h"

namespace sagad {
namespace {

TEST(ApprovalPolicyTest, RulesCompareNumbersAndStrings) {
  nlohmann::json input = {{"amount", 1500}, {"currency", "EUR"}, {"vip", true}};
  EXPECT_TRUE(EvaluateApprovalRule({"amount", ">", 1000}, input));
  EXPECT_FALSE(EvaluateApprovalRule({"amount", ">", 1500}, input));
  EXPECT_TRUE(EvaluateApprovalRule({"amount", ">=", 1500}, input));
  EXPECT_TRUE(EvaluateApprovalRule({"amount", "<", 1500.5}, input));
  EXPECT_TRUE(EvaluateApprovalRule({"currency", "==", "EUR"}, input));
  EXPECT_TRUE(EvaluateApprovalRule({"currency", "!=", "USD"}, input));
  EXPECT_TRUE(EvaluateApprovalRule({"vip", "==", true}, input));
  EXPECT_FALSE(EvaluateApprovalRule({"currency", ">", 3}, input));  // different types
  EXPECT_FALSE(EvaluateApprovalRule({"missing", "==", nullptr}, input));
}

TEST(ApprovalPolicyTest, IrreversibleAlwaysNeedsApprovalOthersByRule) {
  StepDefinition st;
  EXPECT_FALSE(NeedsApproval(st, {{"amount", 5}}));
  st.approval_if = ApprovalRule{"amount", ">", 1000};
  EXPECT_FALSE(NeedsApproval(st, {{"amount", 5}}));
  EXPECT_TRUE(NeedsApproval(st, {{"amount", 5000}}));
  StepDefinition pivot;
  pivot.irreversible = true;
  EXPECT_TRUE(NeedsApproval(pivot, nlohmann::json::object()));
  EXPECT_EQ(ApprovalDeadline(st, 1000), 0);
  st.approval_timeout_ms = 250;
  EXPECT_EQ(ApprovalDeadline(st, 1000), 1250);
}

TEST(RetryBudgetTest, EmptiesThenRefillsAtItsRate) {
  RetryBudget b({/*capacity=*/2, /*per_second=*/4}, /*now_ms=*/0);
  EXPECT_TRUE(b.TryTake(0));
  EXPECT_TRUE(b.TryTake(0));
  EXPECT_FALSE(b.TryTake(0));
  EXPECT_EQ(b.WaitMillis(0), 250);
  EXPECT_FALSE(b.TryTake(249));
  EXPECT_TRUE(b.TryTake(250));
  EXPECT_DOUBLE_EQ(b.tokens(100000), 2.0);  // never above capacity
}

TEST(RetryBudgetTest, ReservationsAreDueOneRefillApart) {
  RetryBudget b({/*capacity=*/1, /*per_second=*/4}, /*now_ms=*/0);
  EXPECT_EQ(b.Reserve(0), 0);    // the token there
  EXPECT_EQ(b.Reserve(0), 250);  // the next refill
  EXPECT_EQ(b.Reserve(0), 500);  // the one after: not the same instant
  EXPECT_FALSE(b.TryTake(499));  // promised tokens are not taken by others
  EXPECT_EQ(b.WaitMillis(500), 250);
  EXPECT_TRUE(b.TryTake(750));
  RetryBudget never({/*capacity=*/0, /*per_second=*/0}, 0);
  EXPECT_GT(never.Reserve(0), int64_t{1} << 60);
}

// A store that refuses an instance's writes: 1, 2, 4 s, then 8 s for as
// long as it goes on (the third probe saw 295 stuck instances ask their
// downstreams 2,400 times a second without it).
TEST(FailurePolicyTest, RefusedCommitsAreTriedAgainAfterADoublingDelayUpTo8s) {
  EXPECT_EQ(RefusedCommitDelayMs(1), 1000);
  EXPECT_EQ(RefusedCommitDelayMs(2), 2000);
  EXPECT_EQ(RefusedCommitDelayMs(3), 4000);
  EXPECT_EQ(RefusedCommitDelayMs(4), 8000);
  EXPECT_EQ(RefusedCommitDelayMs(40), 8000);
  EXPECT_EQ(RefusedCommitDelayMs(0), 1000);  // never less than a second
}

TEST(FailurePolicyTest, CompensatesBeforeThePivotAndEscalatesAfter) {
  EXPECT_EQ(OnDefiniteFailure(false), FailureDecision::kCompensate);
  EXPECT_EQ(OnDefiniteFailure(true), FailureDecision::kReview);
}

TEST(FailurePolicyTest, StepPolicyOverridesTheServiceDefault) {
  StepDefinition st;
  RetryPolicy service;
  service.max_attempts = 9;
  EXPECT_EQ(EffectiveRetry(st, service).max_attempts, 9);
  RetryPolicy own;
  own.max_attempts = 2;
  st.retry = own;
  EXPECT_EQ(EffectiveRetry(st, service).max_attempts, 2);
}

TEST(FailurePolicyTest, MayRetryUntilAttemptsOrDeadlineRunOut) {
  StepDefinition st;
  RetryPolicy p;
  p.max_attempts = 3;
  EXPECT_TRUE(MayRetry(st, p, 2, 1000, 1000000));
  EXPECT_FALSE(MayRetry(st, p, 3, 1000, 1001));
  st.deadline_ms = 500;
  EXPECT_TRUE(MayRetry(st, p, 1, 1000, 1499));
  EXPECT_FALSE(MayRetry(st, p, 1, 1000, 1500));
}

TEST(RetryPolicyDistributionTest, FullJitterIsUniformBelowTheCap) {
  RetryPolicy p;
  p.initial_backoff_ms = 1000;
  p.max_backoff_ms = 1000;
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  double sum = 0;
  int64_t lo = 1 << 30, hi = -1;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    int64_t v = BackoffMillis(p, 1, [&] { return u(rng); });
    sum += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, 0);
  EXPECT_LE(hi, 1000);
  EXPECT_LT(lo, 10);   // reaches the bottom...
  EXPECT_GT(hi, 990);  // ...and the top of the range
  EXPECT_NEAR(sum / n, 500, 10);
}

}  // namespace
}  // namespace sagad
