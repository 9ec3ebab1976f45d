// The planner: given a definition and an instance's state, what must the
// coordinator do next? Pure and deterministic, so recovery after a crash is
// just "plan again from the persisted state".
//
// Steps form a graph (sagas/graph.h); the planner returns the set of actions
// that may run now:
//   * going forward, every step whose dependencies all committed starts (or
//     asks for approval), at most max_parallel steps in flight; a step whose
//     outcome is unclear is reconciled before anything is re-sent;
//   * a definite failure turns the saga back, but nothing is undone while
//     any forward step is in flight or unclear: those are drained
//     (reconciled, never forgotten) first;
//   * reverse_topological: a committed step is undone once every committed
//     step that depends on it was undone, independent undos concurrently;
//     reverse_completion: one at a time, last committed first.
// The engine carries the actions out; one already under way (a request in
// flight in this process) is simply not started twice.
#pragma once

#include <string>
#include <vector>

#include "sagas/definition.h"
#include "sagas/instance.h"

namespace sagad {

enum class ActionKind {
  kNone,                   // waiting for a human, or terminal
  kRequestApproval,        // step needs approval: record AWAITING_APPROVAL
  kExecute,                // send the step's forward call
  kReconcile,              // forward outcome unclear: ask before re-sending
  kStartCompensation,      // a step failed definitely: turn around
  kCompensate,             // send the step's compensation
  kReconcileCompensation,  // compensation outcome unclear: ask first
  kComplete,               // every step committed
  kFinishCompensation,     // every committed step compensated
  kAwaitApproval,          // nothing else can run: the saga waits for a human
  kEscalate,               // nothing else can run and a step needs review
  kGoForward,              // turning back, an irreversible step committed
                           // (during the drain): the saga goes forward, or
                           // to review if something was already undone
};
const char* ActionKindName(ActionKind k);

struct Action {
  ActionKind kind = ActionKind::kNone;
  int step = -1;
};

// What `inst` runs by: `def`, or for a run the instance's own definition,
// which is never behind a copy a caller kept (a run's calls are appended
// as it goes). Index steps of actions planned on `inst` in this one.
const SagaDefinition& CurrentDefinition(const SagaDefinition& def, const Instance& inst);

// Everything that may be done now, forward steps in index order. Never
// empty: {kNone} when nothing is to be done.
std::vector<Action> NextActions(const SagaDefinition& def, const Instance& inst);
// The first of NextActions.
Action NextAction(const SagaDefinition& def, const Instance& inst);

// True for the actions that work on one step (and may run beside others).
bool IsStepAction(ActionKind k);

// For a human (the recovery bundle): each step that committed, with where its
// undo stands: "done", "in_progress", "needs_review", "ready", "waiting"
// (with "waits_for": the committed dependents still to be undone first),
// "not_started" (the saga is going forward) or "none" (it has no undo).
nlohmann::json CompensationPlan(const SagaDefinition& def, const Instance& inst);

// True once an irreversible step has committed: from then on the saga can
// only go forward (failures go to review instead of compensation).
bool PivotCommitted(const SagaDefinition& def, const Instance& inst);

// The first irreversible step that may have taken effect (STARTED, UNKNOWN,
// COMMITTED, or in review of its forward outcome), else -1. From then on
// nothing may turn the saga back: cancel, forced compensation, deadlines and
// definite failures elsewhere are refused or go to review.
int PivotInPlay(const SagaDefinition& def, const Instance& inst);

}  // namespace sagad
