#include "coordinator/saga_turns.h"

#include "policies/failure_policy.h"
#include "sagas/planner.h"

namespace sagad {

Status GiveUp(Tx& tx, const SagaDefinition& def, const std::string& reason) {
  if (tx.inst().status() != SagaStatus::kRunning) return Status::Ok();
  if (OnDefiniteFailure(PivotCommitted(def, tx.inst())) ==
      FailureDecision::kReview)
    return tx.Saga(
        SagaEvent::kEscalate,
        {{"reason", reason + " after the irreversible step committed"}});
  SAGAD_RETURN_IF_ERROR(
      tx.RejectAwaitingApprovals("sagad", "not needed: " + reason));
  return tx.Saga(SagaEvent::kStartCompensation, {{"reason", reason}});
}

Status EscalateStep(Tx& tx, int i, const std::string& reason) {
  const StepState& st = tx.inst().step(i);
  if (st.status() != StepStatus::kNeedsReview &&
      st.status() != StepStatus::kCommitted &&
      st.status() != StepStatus::kPlanned)
    SAGAD_RETURN_IF_ERROR(
        tx.Step(i, StepEvent::kEscalate, {{"error", reason}}));
  if (tx.inst().status() == SagaStatus::kNeedsReview) return Status::Ok();
  return tx.Saga(SagaEvent::kEscalate, {{"reason", reason}, {"step", st.name}});
}

Status EscalateUndo(Tx& tx, const SagaDefinition& def,
                    const std::string& reason, const std::string& step) {
  for (const Action& a : NextActions(def, tx.inst()))
    if (IsStepAction(a.kind)) return Status::Ok();
  return tx.Saga(SagaEvent::kEscalate, {{"reason", reason}, {"step", step}});
}

}  // namespace sagad
