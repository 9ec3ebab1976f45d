#include "policies/operator_rules.h"

#include "policies/planner.h"

namespace sagad {
namespace {

std::string Is(const StepState& st) { return std::string("it is ") + StepStatusName(st.status()); }

bool UnknownForward(const StepState& st) {
  StepStatus s = st.status();
  return s == StepStatus::kStarted || s == StepStatus::kUnknown ||
         (s == StepStatus::kNeedsReview && !st.machine.reviewing_compensation());
}

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

Status NotInReview(const Instance& inst, const std::string& also = "") {
  return FailedPrecondition("instance " + inst.id() + " is not in NEEDS_REVIEW (it is " +
                            SagaStatusName(inst.status()) + ")" + also);
}

nlohmann::json Verdict(const Status& s) {
  if (s.ok()) return {{"allowed", true}};
  return {{"allowed", false}, {"reason", s.message()}};
}

}  // namespace

Status MayApprove(const Instance& inst, int step) {
  const StepState& st = inst.step(step);
  if (st.status() != StepStatus::kAwaitingApproval)
    return FailedPrecondition("step '" + st.name + "' is not awaiting approval (" + Is(st) + ")");
  return Status::Ok();
}

Status MayReject(const Instance& inst, int step) { return MayApprove(inst, step); }

Status MayCancel(const SagaDefinition& def, const Instance& inst) {
  SagaStatus ss = inst.status();
  if (ss == SagaStatus::kCompleted)
    return FailedPrecondition("instance " + inst.id() + " already completed; nothing to cancel");
  if (ss == SagaStatus::kCompensating || ss == SagaStatus::kCompensated)
    return FailedPrecondition("instance " + inst.id() + " is already " + SagaStatusName(ss));
  SAGAD_RETURN_IF_ERROR(RefuseAcrossThePivot(def, inst, "cancel"));
  if (ss == SagaStatus::kNeedsReview)
    return FailedPrecondition("instance " + inst.id() +
                              " needs review; resolve it, or force compensation with "
                              "POST .../compensate");
  return Status::Ok();
}

Status MayRetry(const Instance& inst, int step) {
  const StepState& st = inst.step(step);
  SagaStatus ss = inst.status();
  bool waiting = st.retry_at > 0 && (ss == SagaStatus::kRunning || ss == SagaStatus::kCompensating);
  bool exhausted = ss == SagaStatus::kNeedsReview && st.status() == StepStatus::kPlanned &&
                   st.retries > 0 && !inst.reviewing_compensation();
  if (waiting || exhausted) return Status::Ok();
  if (st.status() == StepStatus::kUnknown || st.status() == StepStatus::kNeedsReview)
    return FailedPrecondition("step '" + st.name +
                              "' has an unknown outcome; a retry could duplicate it: "
                              "resolve it instead");
  return FailedPrecondition("step '" + st.name + "' is not waiting for a retry (" + Is(st) +
                            ", saga " + SagaStatusName(ss) + ")");
}

Status MaySkip(const Instance& inst, int step) {
  const StepState& st = inst.step(step);
  SagaStatus ss = inst.status();
  bool ok = (st.status() == StepStatus::kPlanned &&
             (ss == SagaStatus::kRunning || ss == SagaStatus::kNeedsReview)) ||
            (st.status() == StepStatus::kNeedsReview && !st.machine.reviewing_compensation());
  if (ok) return Status::Ok();
  return FailedPrecondition(
      "step '" + st.name + "' cannot be skipped now (" + Is(st) + ", saga " + SagaStatusName(ss) +
      "); a skip takes a step that is PLANNED while the saga is RUNNING or in NEEDS_REVIEW, or "
      "a step whose forward outcome is under review (a step waiting for its approval is "
      "approved or rejected instead)");
}

Status MayForceCompensate(const SagaDefinition& def, const Instance& inst) {
  if (inst.status() != SagaStatus::kNeedsReview)
    return NotInReview(inst, "; use cancel to stop a running saga");
  SAGAD_RETURN_IF_ERROR(RefuseAcrossThePivot(def, inst, "force compensation of"));
  for (const auto& st : inst.steps())
    if (UnknownForward(st))
      return FailedPrecondition("step '" + st.name +
                                "' has an unknown outcome; resolve it before compensating");
  return Status::Ok();
}

Status MayResolve(const Instance& inst, int step, bool in_flight) {
  if (inst.status() != SagaStatus::kNeedsReview) return NotInReview(inst);
  const StepState& st = inst.step(step);
  if (in_flight)
    return FailedPrecondition("step '" + st.name +
                              "' has a request in flight; its outcome will be recorded "
                              "when it returns");
  StepStatus s = st.status();
  if (s != StepStatus::kStarted && s != StepStatus::kUnknown && s != StepStatus::kNeedsReview)
    return FailedPrecondition("step '" + st.name + "' has no unknown outcome to resolve (" +
                              Is(st) + ")");
  return Status::Ok();
}

nlohmann::json AllowedActions(const SagaDefinition* def, const Instance& inst,
                              const std::function<bool(int)>& in_flight) {
  Status no_def = FailedPrecondition("saga " + inst.saga() + " version " +
                                     std::to_string(inst.saga_version()) + " is not registered");
  nlohmann::json out = {{"cancel", Verdict(def ? MayCancel(*def, inst) : no_def)},
                        {"compensate", Verdict(def ? MayForceCompensate(*def, inst) : no_def)}};
  nlohmann::json steps = nlohmann::json::object();
  for (size_t i = 0; i < inst.steps().size(); ++i) {
    int s = static_cast<int>(i);
    steps[inst.step(i).name] = {{"approve", Verdict(def ? MayApprove(inst, s) : no_def)},
                                {"reject", Verdict(MayReject(inst, s))},
                                {"retry", Verdict(MayRetry(inst, s))},
                                {"skip", Verdict(MaySkip(inst, s))},
                                {"resolve", Verdict(MayResolve(inst, s, in_flight(s)))}};
  }
  out["steps"] = std::move(steps);
  return out;
}

}  // namespace sagad
