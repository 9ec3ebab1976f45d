// RetryPolicy: the retry settings a step (or a service, as the default)
// declares; a value the definition owns. What they mean at run time (the
// backoff before each retry) is decided in policies/retry_policy.h.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "util/status.h"

namespace sagad {

struct RetryPolicy {
  int max_attempts = 5;  // sends of the same key before giving up
  int64_t initial_backoff_ms = 100;
  int64_t max_backoff_ms = 5000;
  double multiplier = 2.0;
  int max_reconciliations = 8;  // queries of an UNKNOWN outcome before review

  nlohmann::json ToJson() const;
  static StatusOr<RetryPolicy> FromJson(const nlohmann::json& j);
  bool operator==(const RetryPolicy& o) const;
};

}  // namespace sagad
