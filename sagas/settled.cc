#include "sagas/settled.h"

namespace sagad {
namespace {

// The table of settled.h, a row per name a view shows.
struct CallMeaning {
  const char* status;
  bool settled, decided, answered, counted;
};
constexpr CallMeaning kCalls[] = {
    {"PLANNED", false, false, false, true},    {"STARTED", false, false, false, true},
    {"UNKNOWN", false, false, false, true},    {"AWAITING_APPROVAL", false, false, true, true},
    {"COMMITTED", true, true, true, true},     {"FAILED", true, true, true, false},
    {"REJECTED", true, true, true, false},     {"COMPENSATING", false, false, true, true},
    {"COMPENSATED", false, true, true, false}, {"NEEDS_REVIEW", false, true, true, true},
    {"CANCELLED", false, true, true, false},
};

// A name no row has (a view from a newer sagad?): the cautious answers (a
// wait goes on, a guard counts it).
constexpr CallMeaning kUnknownName = {"", false, false, false, true};

const CallMeaning& Meaning(const std::string& status) {
  for (const CallMeaning& m : kCalls)
    if (status == m.status) return m;
  return kUnknownName;
}

}  // namespace

bool SagaSettled(SagaStatus s) {
  switch (s) {
    case SagaStatus::kCompleted:
    case SagaStatus::kCompensated:
    case SagaStatus::kAwaitingApproval:
    case SagaStatus::kNeedsReview:
      return true;
    case SagaStatus::kRunning:
    case SagaStatus::kCompensating:
      return false;
  }
  return false;
}

bool SagaDecided(SagaStatus s) {
  return s == SagaStatus::kCompleted || s == SagaStatus::kCompensated ||
         s == SagaStatus::kNeedsReview;
}

bool SagaSettledName(const std::string& status) {
  SagaStatus s;
  return ParseSagaStatus(status, &s) && SagaSettled(s);
}

bool SagaDecidedName(const std::string& status) {
  SagaStatus s;
  return ParseSagaStatus(status, &s) && SagaDecided(s);
}

bool CallSettledName(const std::string& status) { return Meaning(status).settled; }
bool CallDecided(const std::string& status) { return Meaning(status).decided; }
bool CallAnswered(const std::string& status) { return Meaning(status).answered; }
bool CallCounted(const std::string& status) { return Meaning(status).counted; }

bool CallSettled(StepStatus s) { return CallSettledName(StepStatusName(s)); }

}  // namespace sagad
