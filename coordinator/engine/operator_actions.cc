#include "coordinator/engine/operator_actions.h"

#include "adapters/classify.h"
#include "coordinator/engine/step_request.h"
#include "policies/failure_policy.h"
#include "policies/planner.h"

namespace sagad {
namespace {

// Nothing turns a saga back once an irreversible step may have taken effect.
Status RefuseAcrossThePivot(const SagaDefinition& def, const Instance& inst,
                            const std::string& action) {
  int p = PivotInPlay(def, inst);
  if (p < 0) return Status::Ok();
  const StepState& st = inst.step(p);
  return FailedPrecondition("cannot " + action + " instance " + inst.id() +
                            ": its irreversible step '" + st.name + "' is " +
                            StepStatusName(st.status()) +
                            "; the saga can only go forward (resolve, retry or skip its steps)");
}

}  // namespace

OperatorActions::OperatorActions(const DefinitionRegistry& defs, InstanceRepository& repo,
                                 const RunTable& runs, std::function<void(const std::string&)> wake)
    : defs_(defs), repo_(repo), runs_(runs), wake_(std::move(wake)) {}

namespace {

Status NotAwaitingApproval(const StepState& st) {
  return FailedPrecondition("step '" + st.name + "' is not awaiting approval (it is " +
                            StepStatusName(st.status()) + ")");
}

// An operator turns the saga back: pending approvals are withdrawn (their
// requests will not be sent) and compensation starts; `flag` marks why in
// the event ("cancelled" or "forced").
Status TurnBack(Tx& tx, const std::string& actor, const char* flag, const std::string& reason) {
  SAGAD_RETURN_IF_ERROR(tx.RejectAwaitingApprovals(actor, reason));
  return tx.Saga(SagaEvent::kStartCompensation, {{"by", actor}, {flag, true}, {"reason", reason}});
}

}  // namespace

Status OperatorActions::Act(const std::string& id, const std::function<Status(Tx&)>& fn) {
  Status s = repo_.Mutate(id, fn, /*fence=*/nullptr);
  if (s.ok()) wake_(id);
  return s;
}

Status OperatorActions::ActOnStep(const std::string& id, const std::string& step,
                                  const std::function<Status(Tx&, int)>& fn) {
  return Act(id, [&](Tx& tx) -> Status {
    int i = tx.inst().StepIndex(step);
    if (i < 0) return NotFound("instance " + id + " has no step '" + step + "'");
    return fn(tx, i);
  });
}

Status OperatorActions::Approve(const std::string& id, const std::string& step,
                                const std::string& actor, const std::string& comment) {
  return ActOnStep(id, step, [&](Tx& tx, int i) -> Status {
    const StepState& st = tx.inst().step(i);
    if (st.status() != StepStatus::kAwaitingApproval) {
      if (st.machine.approved()) return Status::Ok();  // already approved: nothing to do
      return NotAwaitingApproval(st);
    }
    // The approval binds to the exact request: key and args hash.
    SagaDefinitionPtr def = defs_.Get(tx.inst().saga(), tx.inst().saga_version());
    if (!def)
      return FailedPrecondition("saga " + tx.inst().saga() + " version " +
                                std::to_string(tx.inst().saga_version()) + " is not registered");
    auto r = RenderStepRequest(tx.inst(), def->steps[i].forward);
    if (!r.ok())
      return FailedPrecondition("cannot build the request to approve: " + r.status().message());
    SAGAD_RETURN_IF_ERROR(tx.Step(
        i, StepEvent::kApprove,
        {{"by", actor}, {"comment", comment}, {"key", id + ":" + step}, {"args_hash", r->hash}}));
    if (tx.inst().status() == SagaStatus::kAwaitingApproval)
      SAGAD_RETURN_IF_ERROR(tx.Saga(SagaEvent::kResume, {{"by", actor}}));
    return Status::Ok();
  });
}

Status OperatorActions::Reject(const std::string& id, const std::string& step,
                               const std::string& actor, const std::string& reason) {
  return ActOnStep(id, step, [&](Tx& tx, int i) -> Status {
    const StepState& st = tx.inst().step(i);
    if (st.status() == StepStatus::kRejected) return Status::Ok();
    if (st.status() != StepStatus::kAwaitingApproval) return NotAwaitingApproval(st);
    SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kReject, {{"by", actor}, {"reason", reason}}));
    return tx.Saga(SagaEvent::kStartCompensation,
                   {{"by", actor}, {"reason", "step '" + step + "' rejected: " + reason}});
  });
}

Status OperatorActions::Cancel(const std::string& id, const std::string& actor,
                               const std::string& reason) {
  SagaDefinitionPtr def;
  return Act(id, [&](Tx& tx) -> Status {
    const Instance& inst = tx.inst();
    def = defs_.Get(inst.saga(), inst.saga_version());
    if (!def) return Internal("definition of " + inst.saga() + " is not registered");
    SagaStatus ss = inst.status();
    if (ss == SagaStatus::kCompensating || ss == SagaStatus::kCompensated) return Status::Ok();
    if (ss == SagaStatus::kCompleted)
      return FailedPrecondition("instance " + id + " already completed; nothing to cancel");
    SAGAD_RETURN_IF_ERROR(RefuseAcrossThePivot(*def, inst, "cancel"));
    if (ss == SagaStatus::kNeedsReview)
      return FailedPrecondition("instance " + id +
                                " needs review; resolve it, or force compensation with "
                                "POST .../compensate");
    return TurnBack(tx, actor, "cancelled", "cancelled: " + reason);
  });
}

Status OperatorActions::RetryNow(const std::string& id, const std::string& step,
                                 const std::string& actor, const std::string& comment) {
  return ActOnStep(id, step, [&](Tx& tx, int i) -> Status {
    const StepState& st = tx.inst().step(i);
    SagaStatus ss = tx.inst().status();
    bool waiting =
        st.retry_at > 0 && (ss == SagaStatus::kRunning || ss == SagaStatus::kCompensating);
    bool exhausted = ss == SagaStatus::kNeedsReview && st.status() == StepStatus::kPlanned &&
                     st.retries > 0 && !tx.inst().reviewing_compensation();
    if (!waiting && !exhausted) {
      if (st.status() == StepStatus::kUnknown || st.status() == StepStatus::kNeedsReview)
        return FailedPrecondition("step '" + step +
                                  "' has an unknown outcome; a retry could duplicate it: "
                                  "resolve it instead");
      return FailedPrecondition("step '" + step + "' is not waiting for a retry (it is " +
                                StepStatusName(st.status()) + ", saga " + SagaStatusName(ss) + ")");
    }
    SAGAD_RETURN_IF_ERROR(tx.Note(i, "retry_requested", {{"by", actor}, {"comment", comment}}));
    if (exhausted) return tx.Saga(SagaEvent::kResume, {{"by", actor}, {"step", step}});
    return Status::Ok();
  });
}

Status OperatorActions::Skip(const std::string& id, const std::string& step,
                             const nlohmann::json& result, const std::string& external_ref,
                             const std::string& actor, const std::string& comment) {
  return ActOnStep(id, step, [&](Tx& tx, int i) -> Status {
    const StepState& st = tx.inst().step(i);
    SagaStatus ss = tx.inst().status();
    bool ok_state =
        (st.status() == StepStatus::kPlanned &&
         (ss == SagaStatus::kRunning || ss == SagaStatus::kNeedsReview)) ||
        (st.status() == StepStatus::kNeedsReview && !st.machine.reviewing_compensation());
    if (!ok_state)
      return FailedPrecondition("step '" + step + "' cannot be skipped now (it is " +
                                StepStatusName(st.status()) + ", saga " + SagaStatusName(ss) +
                                "); only a step not yet sent, or under review, can be");
    nlohmann::json res = result.is_null() ? nlohmann::json::object() : result;
    std::string ref = !external_ref.empty() ? external_ref : ExternalRef(res);
    SAGAD_RETURN_IF_ERROR(
        tx.Step(i, StepEvent::kSkip,
                {{"result", res}, {"external_ref", ref}, {"by", actor}, {"comment", comment}}));
    if (tx.inst().status() == SagaStatus::kNeedsReview)
      return tx.Saga(SagaEvent::kResume, {{"by", actor}, {"step", step}});
    return Status::Ok();
  });
}

Status OperatorActions::ForceCompensate(const std::string& id, const std::string& actor,
                                        const std::string& reason) {
  return Act(id, [&](Tx& tx) -> Status {
    const Instance& inst = tx.inst();
    if (inst.status() != SagaStatus::kNeedsReview)
      return FailedPrecondition("instance " + id + " is not in NEEDS_REVIEW (it is " +
                                SagaStatusName(inst.status()) +
                                "); use cancel to stop a running saga");
    SagaDefinitionPtr def = defs_.Get(inst.saga(), inst.saga_version());
    if (!def) return Internal("definition of " + inst.saga() + " is not registered");
    SAGAD_RETURN_IF_ERROR(RefuseAcrossThePivot(*def, inst, "force compensation of"));
    for (const auto& st : inst.steps()) {
      StepStatus ss = st.status();
      if (ss == StepStatus::kStarted || ss == StepStatus::kUnknown ||
          (ss == StepStatus::kNeedsReview && !st.machine.reviewing_compensation()))
        return FailedPrecondition("step '" + st.name +
                                  "' has an unknown outcome; resolve it before compensating");
    }
    return TurnBack(tx, actor, "forced", "compensation forced: " + reason);
  });
}

Status OperatorActions::Resolve(const std::string& id, const std::string& step,
                                const std::string& outcome, const std::string& external_ref,
                                const std::string& actor, const std::string& comment) {
  if (outcome != "committed" && outcome != "not_executed")
    return InvalidArgument("outcome must be \"committed\" or \"not_executed\"");
  nlohmann::json resolution = {{"outcome", outcome}, {"by", actor}, {"comment", comment}};
  if (!external_ref.empty()) resolution["external_ref"] = external_ref;
  return ActOnStep(id, step, [&](Tx& tx, int i) -> Status {
    if (tx.inst().status() != SagaStatus::kNeedsReview)
      return FailedPrecondition("instance " + id + " is not in NEEDS_REVIEW (it is " +
                                SagaStatusName(tx.inst().status()) + ")");
    if (runs_.StepUnderWay(id, i))
      return FailedPrecondition("step '" + step +
                                "' has a request in flight; its outcome will be recorded "
                                "when it returns");
    const StepState& st = tx.inst().step(i);
    if (st.status() == StepStatus::kStarted || st.status() == StepStatus::kUnknown)
      SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kEscalate, {{"error", "operator review"}}));
    if (tx.inst().step(i).status() != StepStatus::kNeedsReview)
      return FailedPrecondition("step '" + step + "' has no unknown outcome to resolve (it is " +
                                StepStatusName(tx.inst().step(i).status()) + ")");
    bool comp = tx.inst().step(i).machine.reviewing_compensation();
    if (outcome == "committed") {
      if (comp) {
        SAGAD_RETURN_IF_ERROR(
            tx.Step(i, StepEvent::kCompensationDone, {{"resolution", resolution}}));
      } else {
        nlohmann::json result = {{"resolved_by_operator", true}};
        if (!external_ref.empty()) result["ref"] = external_ref;
        SAGAD_RETURN_IF_ERROR(tx.Step(
            i, StepEvent::kCommit,
            {{"result", result}, {"external_ref", external_ref}, {"resolution", resolution}}));
      }
    } else {
      SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kNotExecuted, {{"resolution", resolution}}));
    }
    return tx.Saga(SagaEvent::kResume, {{"by", actor}, {"step", step}});
  });
}

}  // namespace sagad
