// Retry policy: how often and how fast a step is tried again when its outcome
// says "not executed, try later" (429, refused connection) or while an UNKNOWN
// outcome is being reconciled. Pure functions, no clock, injected randomness.
#pragma once

#include <cstdint>
#include <functional>

#include "sagas/retry_settings.h"

namespace sagad {

// Returns a value in [0, 1). Tests pass a fixed sequence.
using UnitRandom = std::function<double()>;

// Full-jitter exponential backoff before retry number `retry` (1-based):
// uniform in [0, min(max_backoff, initial * multiplier^(retry-1))].
// REQUIRES: retry >= 1.
int64_t BackoffMillis(const RetryPolicy& policy, int retry, const UnitRandom& random);

// Equal-jitter backoff for asking about an unclear outcome: at least half of
// the exponential cap, so a budget of N queries spans a guaranteed minimum
// time (a slow downstream gets the chance to finish). REQUIRES: retry >= 1.
int64_t ReconcileDelayMillis(const RetryPolicy& policy, int retry, const UnitRandom& random);

}  // namespace sagad
