#include "policies/failure_policy.h"

#include <algorithm>

namespace sagad {

FailureDecision OnDefiniteFailure(bool pivot_committed) {
  return pivot_committed ? FailureDecision::kReview : FailureDecision::kCompensate;
}

RetryPolicy EffectiveRetry(const StepDefinition& step, const RetryPolicy& service_default) {
  return step.retry ? *step.retry : service_default;
}

bool MayRetry(const StepDefinition& step, const RetryPolicy& policy, int failed_sends,
              int64_t first_sent_ms, int64_t now_ms) {
  if (failed_sends >= policy.max_attempts) return false;
  if (step.deadline_ms > 0 && first_sent_ms > 0 && now_ms - first_sent_ms >= step.deadline_ms)
    return false;
  return true;
}

int64_t RefusedCommitDelayMs(int refusals_in_a_row) {
  const int n = std::min(std::max(refusals_in_a_row, 1), 4);
  return int64_t(1000) << (n - 1);
}

}  // namespace sagad
