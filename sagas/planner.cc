#include "sagas/planner.h"

#include "policies/approval_policy.h"

namespace sagad {

const char* ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kNone: return "none";
    case ActionKind::kRequestApproval: return "request_approval";
    case ActionKind::kExecute: return "execute";
    case ActionKind::kReconcile: return "reconcile";
    case ActionKind::kStartCompensation: return "start_compensation";
    case ActionKind::kCompensate: return "compensate";
    case ActionKind::kReconcileCompensation: return "reconcile_compensation";
    case ActionKind::kComplete: return "complete";
    case ActionKind::kFinishCompensation: return "finish_compensation";
  }
  return "?";
}

bool PivotCommitted(const SagaDefinition& def, const Instance& inst) {
  for (size_t i = 0; i < def.steps.size(); ++i)
    if (def.steps[i].irreversible && inst.step(i).status() == StepStatus::kCommitted)
      return true;
  return false;
}

Action NextAction(const SagaDefinition& def, const Instance& inst) {
  const int n = static_cast<int>(inst.steps().size());
  switch (inst.status()) {
    case SagaStatus::kRunning:
      for (int i = 0; i < n; ++i) {
        const StepState& st = inst.step(i);
        switch (st.status()) {
          case StepStatus::kCommitted:
            continue;
          case StepStatus::kPlanned:
            if (NeedsApproval(def.steps[i], inst.input()) && !st.machine.approved())
              return {ActionKind::kRequestApproval, i};
            return {ActionKind::kExecute, i};
          case StepStatus::kStarted:
          case StepStatus::kUnknown:
            return {ActionKind::kReconcile, i};
          case StepStatus::kFailed:
          case StepStatus::kRejected:
            return {ActionKind::kStartCompensation, i};
          default:
            return {ActionKind::kNone, i};
        }
      }
      return {ActionKind::kComplete, -1};
    case SagaStatus::kCompensating:
      for (int i = n - 1; i >= 0; --i) {
        const StepState& st = inst.step(i);
        switch (st.status()) {
          case StepStatus::kCommitted:
            // An irreversible step has no undo: the reverse path passes it
            // (only an operator's forced compensation gets here after a pivot).
            if (!def.steps[i].compensation) continue;
            return {ActionKind::kCompensate, i};
          case StepStatus::kCompensating:
            return {ActionKind::kReconcileCompensation, i};
          case StepStatus::kStarted:
          case StepStatus::kUnknown:
            // Must learn whether it happened before it can be undone.
            return {ActionKind::kReconcile, i};
          case StepStatus::kNeedsReview:
            return {ActionKind::kNone, i};
          default:
            continue;
        }
      }
      return {ActionKind::kFinishCompensation, -1};
    default:
      return {ActionKind::kNone, -1};
  }
}

}  // namespace sagad
