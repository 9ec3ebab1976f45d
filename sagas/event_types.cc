#include "sagas/event_types.h"

namespace sagad {

const char* StepNoteName(StepNote n) {
  switch (n) {
    case StepNote::kReconciled:
      return "reconciled";
    case StepNote::kRetryDeferred:
      return "retry_deferred";
    case StepNote::kRetryRequested:
      return "retry_requested";
  }
  return "unknown";
}

bool ParseStepNote(const std::string& type, StepNote* out) {
  for (int k = 0; k <= static_cast<int>(kLastStepNote); ++k) {
    auto n = static_cast<StepNote>(k);
    if (type == StepNoteName(n)) {
      *out = n;
      return true;
    }
  }
  return false;
}

}  // namespace sagad
