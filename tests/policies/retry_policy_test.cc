#include "policies/retry_policy.h"

#include <gtest/gtest.h>

namespace sagad {
namespace {

TEST(RetryPolicyTest, FullJitterBackoffGrowsExponentiallyUpToTheCap) {
  RetryPolicy p;
  p.initial_backoff_ms = 100;
  p.multiplier = 2;
  p.max_backoff_ms = 1000;
  auto top = [] { return 0.999999999; };
  EXPECT_EQ(BackoffMillis(p, 1, top), 100);
  EXPECT_EQ(BackoffMillis(p, 2, top), 200);
  EXPECT_EQ(BackoffMillis(p, 4, top), 800);
  EXPECT_EQ(BackoffMillis(p, 5, top), 1000);
  EXPECT_EQ(BackoffMillis(p, 30, top), 1000);
  EXPECT_EQ(BackoffMillis(p, 3, [] { return 0.0; }), 0);
  EXPECT_EQ(BackoffMillis(p, 3, [] { return 0.5; }), 200);
}

TEST(RetryPolicyTest, ReconciliationDelayIsAtLeastHalfTheCap) {
  RetryPolicy p;
  p.initial_backoff_ms = 100;
  p.multiplier = 2;
  p.max_backoff_ms = 1000;
  EXPECT_EQ(ReconcileDelayMillis(p, 1, [] { return 0.0; }), 50);
  EXPECT_EQ(ReconcileDelayMillis(p, 3, [] { return 0.0; }), 200);
  EXPECT_EQ(ReconcileDelayMillis(p, 3, [] { return 0.999999999; }), 400);
  EXPECT_EQ(ReconcileDelayMillis(p, 9, [] { return 0.0; }), 500);
}

TEST(RetryPolicyTest, ValidatesItsFields) {
  EXPECT_FALSE(RetryPolicy::FromJson({{"max_attempts", 0}}).ok());
  EXPECT_FALSE(RetryPolicy::FromJson({{"initial_backoff_ms", 10}, {"max_backoff_ms", 5}}).ok());
  EXPECT_FALSE(RetryPolicy::FromJson({{"multiplier", 0.5}}).ok());
  EXPECT_FALSE(RetryPolicy::FromJson({{"max_attempts", "x"}}).ok());
  auto p = RetryPolicy::FromJson({{"max_attempts", 3}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->max_attempts, 3);
}

}  // namespace
}  // namespace sagad
