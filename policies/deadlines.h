// Deadlines: which of an instance's clocks has run out at a time, and when
// the next one will. Three clocks, looked at in this order (the first that
// ran out is the one the driver acts on):
// - the saga's deadline (deadline_ms after its creation), while it is
//   RUNNING or AWAITING_APPROVAL and no irreversible step is in play
//   (PivotInPlay: past the pivot there is nothing to turn back to);
// - a run's idle timeout (idle_timeout_ms after its last change), while it
//   is RUNNING with every call settled (its agent is the one to act);
// - each step's approval timeout (ApprovalDeadline), while the step waits
//   in AWAITING_APPROVAL, in step order.
// Nothing runs out while the saga is anything else (compensating, in review,
// finished).
// Pure function of the definition, the instance and the time; what each one
// writes is the engine's (Driver::Deadlines).
#pragma once

#include <cstdint>

#include "sagas/definition.h"
#include "sagas/instance.h"

namespace sagad {

enum class DeadlineKind {
  kNone,             // nothing ran out
  kSagaDeadline,     // the saga's deadline passed: turn back
  kRunIdle,          // a run's agent has been silent for its idle timeout
  kApprovalTimeout,  // `step`'s approval timed out
};

struct DueDeadline {
  DeadlineKind kind = DeadlineKind::kNone;
  int step = -1;        // kApprovalTimeout: the step whose approval timed out
  int64_t next_ms = 0;  // kNone: the nearest deadline still ahead (0: none)
};

// What has run out at `now_ms` (the first in the order above), else kNone
// and when the next one runs out.
DueDeadline NextDeadline(const SagaDefinition& def, const Instance& inst, int64_t now_ms);

// Lowers *wake (0: none yet) to `due`: the earliest of the times an instance
// must be woken at (its deadlines, its steps' retries).
void EarliestWake(int64_t due, int64_t* wake);

}  // namespace sagad
