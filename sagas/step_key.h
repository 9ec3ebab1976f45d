// The Idempotency-Key of each logical operation of an instance: a step's
// forward action ("<instance>:<step>") and its compensation
// ("<instance>:<step>:compensate"). The key is part of the downstream
// protocol (a service deduplicates by it, the operation records are kept
// under it): it must never change for an operation already stored, so it
// is built here and nowhere else.
#pragma once

#include <string>

namespace sagad {

inline std::string StepKey(const std::string& instance, const std::string& step) {
  return instance + ":" + step;
}

inline std::string CompensationKey(const std::string& instance, const std::string& step) {
  return StepKey(instance, step) + ":compensate";
}

}  // namespace sagad
