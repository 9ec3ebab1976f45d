#include "policies/retry_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace sagad {

int64_t BackoffMillis(const RetryPolicy& policy, int retry, const UnitRandom& random) {
  double cap = static_cast<double>(policy.initial_backoff_ms) *
               std::pow(policy.multiplier, std::max(0, retry - 1));
  cap = std::min(cap, static_cast<double>(policy.max_backoff_ms));
  return static_cast<int64_t>(std::floor(random() * (cap + 1.0)));
}

int64_t ReconcileDelayMillis(const RetryPolicy& policy, int retry, const UnitRandom& random) {
  return BackoffMillis(policy, retry, [&] { return 0.5 + 0.5 * random(); });
}

}  // namespace sagad
