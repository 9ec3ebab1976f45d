#include "policies/step_outcomes.h"

#include "policies/failure_policy.h"

namespace sagad {

StepNext ForwardNotExecuted(const StepDefinition& step, const RetryPolicy& policy,
                            const StepState& st, int64_t now_ms, const UnitRandom& random) {
  if (st.forward_in_doubt) {
    // Counted in sends: the unclear one and those after it.
    if (!MayRetry(step, policy, st.attempts, st.first_sent_at, now_ms))
      return {StepMove::kEscalate};
    return {StepMove::kStayUnknown, now_ms + BackoffMillis(policy, st.attempts, random)};
  }
  const int retry = st.retries + 1;
  if (!MayRetry(step, policy, retry, st.first_sent_at, now_ms)) return {StepMove::kGiveUp};
  return {StepMove::kRetry, now_ms + BackoffMillis(policy, retry, random)};
}

StepNext ForwardNeverHappened(const StepDefinition& step, const RetryPolicy& policy,
                              const StepState& st, bool saga_running, int64_t now_ms,
                              const UnitRandom& random) {
  if (!saga_running) return {StepMove::kStop};
  if (!MayRetry(step, policy, st.attempts, st.first_sent_at, now_ms)) return {StepMove::kGiveUp};
  StepNext next{StepMove::kRetry, now_ms + BackoffMillis(policy, st.attempts, random)};
  next.interrupted = st.status() == StepStatus::kStarted;
  return next;
}

StepNext StillUnclear(const RetryPolicy& policy, int asked_before, int64_t now_ms,
                      const UnitRandom& random) {
  const int n = asked_before + 1;
  if (n >= policy.max_reconciliations) return {StepMove::kEscalate};
  return {StepMove::kAskAgain, now_ms + ReconcileDelayMillis(policy, n, random)};
}

StepNext CompensationNotExecuted(const RetryPolicy& policy, int comp_attempts, int64_t now_ms,
                                 const UnitRandom& random) {
  if (comp_attempts >= policy.max_attempts) return {StepMove::kEscalate};
  return {StepMove::kRetry, now_ms + BackoffMillis(policy, comp_attempts, random)};
}

}  // namespace sagad
