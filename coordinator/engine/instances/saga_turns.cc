#include "coordinator/engine/instances/saga_turns.h"

#include "policies/failure_policy.h"
#include "policies/planner.h"

namespace sagad {

const char* const kAgentSilent = "agent silent";

Status GiveUp(Tx& tx, const SagaDefinition& def, const std::string& reason) {
  if (tx.inst().status() != SagaStatus::kRunning || tx.inst().is_run()) return Status::Ok();
  const int pivot = PivotInPlay(def, tx.inst());
  if (OnDefiniteFailure(pivot >= 0) == FailureDecision::kReview)
    return tx.Saga(
        SagaEvent::kEscalate,
        {{"reason", reason + " after the irreversible step '" + def.steps[pivot].name + "' " +
                        (tx.inst().step(pivot).status() == StepStatus::kCommitted ? "committed"
                                                                                  : "started")}});
  SAGAD_RETURN_IF_ERROR(tx.RejectAwaitingApprovals("sagad", "not needed: " + reason));
  return tx.Saga(SagaEvent::kStartCompensation, {{"reason", reason}});
}

Status NoMoreSends(Tx& tx, const SagaDefinition& def, int i, const nlohmann::json& error,
                   const std::string& reason) {
  if (tx.inst().is_run()) {
    // UNKNOWN turns FAILED only by a confirmation that nothing happened:
    // here it is one (asked, and not executed), as a refusal is.
    const bool unknown = tx.inst().step(i).status() == StepStatus::kUnknown;
    return tx.Step(i, unknown ? StepEvent::kConfirmRefused : StepEvent::kFail, error);
  }
  SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kNotExecuted, error));
  return GiveUp(tx, def, reason);
}

Status GoForward(Tx& tx, const SagaDefinition& def) {
  if (tx.inst().status() != SagaStatus::kCompensating) return MovedOn("moved on");
  const int pivot = PivotInPlay(def, tx.inst());
  if (pivot < 0) return MovedOn("moved on");
  const std::string name = def.steps[pivot].name;
  bool undone = false;
  for (const StepState& st : tx.inst().steps()) {
    StepStatus s = st.status();
    undone = undone || s == StepStatus::kCompensating || s == StepStatus::kCompensated ||
             s == StepStatus::kFailed || s == StepStatus::kRejected ||
             st.machine.reviewing_compensation();
  }
  if (undone)
    return tx.Saga(SagaEvent::kEscalate, {{"reason", "irreversible step '" + name +
                                                         "' committed while the saga was turning "
                                                         "back and something was already undone "
                                                         "or refused; it can only go forward"},
                                          {"step", name}});
  return tx.Saga(SagaEvent::kResume, {{"reason", "irreversible step '" + name +
                                                     "' committed while the saga was turning "
                                                     "back: it goes forward"}});
}

Status EscalateStep(Tx& tx, int i, const std::string& reason) {
  const StepState& st = tx.inst().step(i);
  if (st.status() != StepStatus::kNeedsReview && st.status() != StepStatus::kCommitted &&
      st.status() != StepStatus::kPlanned)
    SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kEscalate, {{"error", reason}}));
  if (tx.inst().status() == SagaStatus::kNeedsReview) return Status::Ok();
  return tx.Saga(SagaEvent::kEscalate, {{"reason", reason}, {"step", st.name}});
}

Status EscalateUndo(Tx& tx, const SagaDefinition& def, const std::string& reason,
                    const std::string& step) {
  for (const Action& a : NextActions(def, tx.inst()))
    if (IsStepAction(a.kind)) return Status::Ok();
  return tx.Saga(SagaEvent::kEscalate, {{"reason", reason}, {"step", step}});
}

Mutation IdleRun(const SagaDefinition& def, const Instance& inst) {
  return [abort = def.idle_abort, seen = inst.last_seq(), ms = def.idle_timeout_ms](Tx& tx) {
    if (tx.inst().last_seq() != seen) return MovedOn("the agent acted meanwhile");
    const std::string why = std::string(kAgentSilent) + " for " + std::to_string(ms / 1000) + " s";
    if (abort && PivotInPlay(*tx.inst().run_definition(), tx.inst()) < 0)
      return tx.Saga(SagaEvent::kStartCompensation, {{"by", "sagad"}, {"reason", why}});
    return tx.Saga(SagaEvent::kEscalate, {{"reason", kAgentSilent}, {"detail", why}});
  };
}

}  // namespace sagad
