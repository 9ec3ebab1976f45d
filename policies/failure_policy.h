// Failure policy: what a definite failure (or exhausted retries) means for
// the saga, and which retry policy and declarations govern a step.
#pragma once

#include <cstdint>

#include "policies/retry_policy.h"
#include "sagas/definition.h"

namespace sagad {

enum class FailureDecision {
  kCompensate,  // before the pivot: undo the committed steps in reverse order
  kReview,      // after the pivot: only forward is possible; a human decides
};

FailureDecision OnDefiniteFailure(bool pivot_committed);

// The step's own retry policy, else the service's default.
RetryPolicy EffectiveRetry(const StepDefinition& step, const RetryPolicy& service_default);

// True when another send of the step is allowed: fewer than max_attempts
// sends that did not get through, and the step deadline (from the first send
// at `first_sent_ms`) not passed at `now_ms`.
bool MayRetry(const StepDefinition& step, const RetryPolicy& policy, int failed_sends,
              int64_t first_sent_ms, int64_t now_ms);

// An instance whose transitions the store refused `refusals_in_a_row` times
// in a row (1 or more: a full disk, a database away) is planned again after
// 1, 2, 4, then 8 s: stuck instances neither hammer their downstreams nor
// flood the log while the store cannot take their writes.
int64_t RefusedCommitDelayMs(int refusals_in_a_row);

}  // namespace sagad
