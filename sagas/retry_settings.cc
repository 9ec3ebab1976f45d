#include "sagas/retry_settings.h"

#include <algorithm>
#include <cstdint>

#include "sagas/definition_keys.h"
#include "util/json_limits.h"

namespace sagad {
namespace {
constexpr int64_t kTenYearsMs = int64_t(10) * 365 * 24 * 3600 * 1000;
}  // namespace

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
  const auto& known = RetryKeys().keys;
  for (const auto& item : j.items())
    if (std::find(known.begin(), known.end(), item.key()) == known.end())
      return InvalidArgument("unknown key '" + item.key() + "' in a retry policy");
  try {
    // Integers checked before conversion (a float out of range is undefined
    // behaviour to convert).
    const std::string where = "retry policy";
    SAGAD_RETURN_IF_ERROR(IntField(j, "max_attempts", 1, 1000000, where, &p.max_attempts));
    SAGAD_RETURN_IF_ERROR(
        IntField(j, "initial_backoff_ms", 0, kTenYearsMs, where, &p.initial_backoff_ms));
    SAGAD_RETURN_IF_ERROR(IntField(j, "max_backoff_ms", 0, kTenYearsMs, where, &p.max_backoff_ms));
    p.multiplier = j.value("multiplier", p.multiplier);
    SAGAD_RETURN_IF_ERROR(
        IntField(j, "max_reconciliations", 1, 1000000, where, &p.max_reconciliations));
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("retry policy: " + JsonErrorText(e));
  }
  if (p.max_attempts < 1) return InvalidArgument("retry.max_attempts must be >= 1");
  if (p.initial_backoff_ms < 0 || p.max_backoff_ms < p.initial_backoff_ms)
    return InvalidArgument("retry backoff must satisfy 0 <= initial <= max");
  if (p.multiplier < 1.0) return InvalidArgument("retry.multiplier must be >= 1");
  if (p.max_reconciliations < 1) return InvalidArgument("retry.max_reconciliations must be >= 1");
  return p;
}

bool RetryPolicy::operator==(const RetryPolicy& o) const {
  return max_attempts == o.max_attempts && initial_backoff_ms == o.initial_backoff_ms &&
         max_backoff_ms == o.max_backoff_ms && multiplier == o.multiplier &&
         max_reconciliations == o.max_reconciliations;
}

}  // namespace sagad
