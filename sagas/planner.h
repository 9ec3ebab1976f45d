// The planner: given a definition and an instance's state, what is the next
// thing the coordinator must do? Pure and deterministic, so recovery after a
// crash is just "plan again from the persisted state".
#pragma once

#include <string>

#include "sagas/definition.h"
#include "sagas/instance.h"

namespace sagad {

enum class ActionKind {
  kNone,                    // waiting for a human, or terminal
  kRequestApproval,         // step needs approval: record AWAITING_APPROVAL
  kExecute,                 // send the step's forward call
  kReconcile,               // forward outcome unclear: ask before re-sending
  kStartCompensation,       // a step failed definitely: turn around
  kCompensate,              // send the step's compensation
  kReconcileCompensation,   // compensation outcome unclear: ask first
  kComplete,                // every step committed
  kFinishCompensation,      // every committed step compensated
};
const char* ActionKindName(ActionKind k);

struct Action {
  ActionKind kind = ActionKind::kNone;
  int step = -1;
};

Action NextAction(const SagaDefinition& def, const Instance& inst);

// True once an irreversible step has committed: from then on the saga can
// only go forward (failures go to review instead of compensation).
bool PivotCommitted(const SagaDefinition& def, const Instance& inst);

}  // namespace sagad
