// SagaMachine: the lifecycle of a saga instance, a Boost.MSM machine behind a
// plain header (templates only in saga_machine.cc).
//
//   RUNNING <-> AWAITING_APPROVAL;  RUNNING -> COMPLETED
//   RUNNING | AWAITING_APPROVAL -> COMPENSATING -> COMPENSATED
//   RUNNING | AWAITING_APPROVAL | COMPENSATING -> NEEDS_REVIEW -> (resume)
//   COMPENSATING -> RUNNING (resume: an irreversible step committed during
//   the drain, before anything was undone)
//
// No I/O. Thread-safety: none; owned by one Instance.
#pragma once

#include <memory>
#include <string>

#include "util/status.h"

namespace sagad {

enum class SagaStatus {
  kRunning,
  kAwaitingApproval,
  kCompleted,
  kCompensating,
  kCompensated,
  kNeedsReview,
};
const char* SagaStatusName(SagaStatus s);
bool ParseSagaStatus(const std::string& name, SagaStatus* out);
// COMPLETED and COMPENSATED: nothing more will ever happen.
bool IsTerminal(SagaStatus s);

enum class SagaEvent {
  kWaitForApproval,     // RUNNING -> AWAITING_APPROVAL
  kResume,              // AWAITING_APPROVAL | COMPENSATING -> RUNNING; NEEDS_REVIEW -> where it was
  kComplete,            // RUNNING -> COMPLETED
  kStartCompensation,   // RUNNING | AWAITING_APPROVAL | NEEDS_REVIEW -> COMPENSATING
  kFinishCompensation,  // COMPENSATING -> COMPENSATED
  kEscalate,            // -> NEEDS_REVIEW
};
const char* SagaEventName(SagaEvent e);
bool ParseSagaEvent(const std::string& name, SagaEvent* out);

class SagaMachine {
 public:
  SagaMachine();
  ~SagaMachine();
  SagaMachine(const SagaMachine& other);
  SagaMachine& operator=(const SagaMachine& other);

  // Applies `e`; FailedPrecondition (state unchanged) if not allowed.
  Status Process(SagaEvent e);
  SagaStatus status() const;
  // In NEEDS_REVIEW, entered while compensating.
  bool reviewing_compensation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sagad
