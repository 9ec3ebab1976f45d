#include "sagas/retry_settings.h"

#include <cstdint>

#include "sagas/definition_keys.h"
#include "util/json_limits.h"

namespace sagad {

nlohmann::json RetryPolicy::ToJson() const {
  return {{"max_attempts", max_attempts},
          {"initial_backoff_ms", initial_backoff_ms},
          {"max_backoff_ms", max_backoff_ms},
          {"multiplier", multiplier},
          {"max_reconciliations", max_reconciliations}};
}

StatusOr<RetryPolicy> RetryPolicy::FromJson(const nlohmann::json& j) {
  RetryPolicy p;
  if (!j.is_object()) return InvalidArgument("retry policy must be an object");
  SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(j, RetryKeys().keys, "a retry policy"));
  try {
    // Integers checked before conversion (a float out of range is undefined
    // behaviour to convert).
    const std::string where = "retry policy";
    SAGAD_RETURN_IF_ERROR(IntField(j, "max_attempts", 1, 1000000, where, &p.max_attempts));
    SAGAD_RETURN_IF_ERROR(
        IntField(j, "initial_backoff_ms", 0, kMaxDurationMs, where, &p.initial_backoff_ms));
    SAGAD_RETURN_IF_ERROR(
        IntField(j, "max_backoff_ms", 0, kMaxDurationMs, where, &p.max_backoff_ms));
    p.multiplier = j.value("multiplier", p.multiplier);
    SAGAD_RETURN_IF_ERROR(
        IntField(j, "max_reconciliations", 1, 1000000, where, &p.max_reconciliations));
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("retry policy: " + JsonErrorText(e));
  }
  // (max_attempts, max_reconciliations and the backoffs' lower bounds are
  // IntField's above.)
  if (p.max_backoff_ms < p.initial_backoff_ms)
    return InvalidArgument("retry backoff must satisfy 0 <= initial <= max");
  if (p.multiplier < 1.0) return InvalidArgument("retry.multiplier must be >= 1");
  return p;
}

bool RetryPolicy::operator==(const RetryPolicy& o) const {
  return max_attempts == o.max_attempts && initial_backoff_ms == o.initial_backoff_ms &&
         max_backoff_ms == o.max_backoff_ms && multiplier == o.multiplier &&
         max_reconciliations == o.max_reconciliations;
}

}  // namespace sagad
