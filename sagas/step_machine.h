// StepMachine: the lifecycle of one step, a Boost.MSM machine behind a plain
// header (the MSM templates live only in step_machine.cc).
//
//   PLANNED -> (AWAITING_APPROVAL) -> STARTED -> COMMITTED | FAILED | UNKNOWN
//   UNKNOWN -> COMMITTED | STARTED (same key) | NEEDS_REVIEW | FAILED (only when the
//   downstream answered the reconciliation: received and refused)
//   AWAITING_APPROVAL -> REJECTED
//   COMMITTED -> COMPENSATING -> COMPENSATED | NEEDS_REVIEW
//
// The machine does no I/O; it only decides whether an event is allowed in the
// current state. Rebuild it by replaying a step's events (sagas/instance.h).
// Thread-safety: none; owned by one Instance.
#pragma once

#include <memory>

#include "util/status.h"

namespace sagad {

enum class StepStatus {
  kPlanned,
  kAwaitingApproval,
  kStarted,
  kCommitted,
  kFailed,
  kUnknown,
  kRejected,
  kCompensating,
  kCompensated,
  kNeedsReview,
};
const char* StepStatusName(StepStatus s);

enum class StepEvent {
  kRequestApproval,      // PLANNED -> AWAITING_APPROVAL
  kApprove,              // AWAITING_APPROVAL -> PLANNED (approved, may start)
  kReject,               // AWAITING_APPROVAL -> REJECTED
  kStart,                // PLANNED | UNKNOWN | STARTED -> STARTED (durable before send)
  kCommit,               // STARTED | UNKNOWN | NEEDS_REVIEW -> COMMITTED
  kFail,                 // STARTED -> FAILED (definite rejection)
  kOutcomeUnknown,       // STARTED -> UNKNOWN
  kNotExecuted,          // nothing happened: back to PLANNED (forward) or
                         // COMMITTED (compensation not applied)
  kEscalate,             // -> NEEDS_REVIEW
  kBeginCompensation,    // COMMITTED -> COMPENSATING (durable before send)
  kCompensationDone,     // COMPENSATING | NEEDS_REVIEW(comp) -> COMPENSATED
  kCompensationUnknown,  // COMPENSATING, outcome unclear
  kSkip,                 // PLANNED | NEEDS_REVIEW -> COMMITTED with an operator's result
  kConfirmRefused,       // STARTED | UNKNOWN -> FAILED: the downstream answered the
                         // reconciliation that it received and refused the request
                         // (a timeout alone is never FAILED)
};
const char* StepEventName(StepEvent e);
// Parses a name produced by StepEventName; false if unknown.
bool ParseStepEvent(const std::string& name, StepEvent* out);

class StepMachine {
 public:
  StepMachine();
  ~StepMachine();
  StepMachine(const StepMachine& other);
  StepMachine& operator=(const StepMachine& other);

  // Applies `e`. FailedPrecondition (state unchanged) if the transition table
  // has no row for it in the current state.
  Status Process(StepEvent e);

  StepStatus status() const;
  // An operator approved this step (it may start although it needs approval).
  bool approved() const;
  // The step's compensation was sent and its outcome is not known.
  bool compensation_in_doubt() const;
  // In NEEDS_REVIEW because of its compensation (not its forward action).
  bool reviewing_compensation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sagad
