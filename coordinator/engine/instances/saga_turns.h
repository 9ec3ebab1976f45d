// Saga-level turns a transition may take when a step ends badly, or a run's
// agent fell silent: turn back (compensate), or stop for a human
// (NEEDS_REVIEW). Pure: they add events to
// the transition and touch nothing else. Thread-safety: as Tx's.
#pragma once

#include <string>

#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/instances/transition.h"
#include "sagas/definition.h"

namespace sagad {

// Definite failure of the forward path (failure policy): compensate before
// the pivot, review once it may have taken effect (STARTED, UNKNOWN or
// COMMITTED: nothing can be undone any more). Pending approvals in other
// branches are withdrawn. No-op unless RUNNING, and for a run: a run's
// failed call ends FAILED and nothing else happens (its agent decides what
// comes next; only abort, the idle rule or an operator turn a run back).
Status GiveUp(Tx& tx, const SagaDefinition& def, const std::string& reason);

// Step i's forward call was not executed and will not be sent again (its
// tries ran out, STARTED or UNKNOWN before this): a saga's step goes back to
// PLANNED (it never happened) and the saga gives up (GiveUp); a run's call
// ends FAILED with `error`, the service's last answer, and its run stays
// OPEN.
Status NoMoreSends(Tx& tx, const SagaDefinition& def, int i, const nlohmann::json& error,
                   const std::string& reason);

// Turning back, an irreversible step committed (it was in flight when the
// saga turned): the saga goes forward again if nothing was undone or
// refused, else to review. Never COMPENSATED with a pivot COMMITTED.
Status GoForward(Tx& tx, const SagaDefinition& def);

// Step i's outcome cannot be known or accepted: the step goes to review (if
// it is not there, committed or planned already) and so does the saga.
Status EscalateStep(Tx& tx, int i, const std::string& reason);

// The undo of `step` went to review. The other undos go on (only its
// ancestors wait for it); the saga follows once nothing else can be undone.
Status EscalateUndo(Tx& tx, const SagaDefinition& def, const std::string& reason,
                    const std::string& step);

// Why a run went to review when its agent fell silent (review_reason).
extern const char* const kAgentSilent;

// A run whose agent has been silent for its toolbox's idle_timeout (every
// call settled, nothing new since: policies/deadlines.h says when): the
// transition that sends it to review (kAgentSilent), or aborts it when its
// toolbox says so and no irreversible call is in play; refused if the agent
// acted meanwhile.
Mutation IdleRun(const SagaDefinition& def, const Instance& inst);

}  // namespace sagad
