#include "coordinator/engine/actions/operator_actions.h"

#include "adapters/classify.h"
#include "coordinator/engine/steps/step_request.h"
#include "policies/failure_policy.h"
#include "policies/operator_rules.h"
#include "sagas/step_key.h"
#include "util/json_limits.h"

namespace sagad {

OperatorActions::OperatorActions(const DefinitionRegistry& defs, InstanceRepository& repo,
                                 const RunTable& runs, Wake wake)
    : defs_(defs), repo_(repo), runs_(runs), wake_(std::move(wake)) {}

namespace {

// An operator turns the saga back: pending approvals are withdrawn (their
// requests will not be sent) and compensation starts; `flag` marks why in
// the event ("cancelled" or "forced").
Status TurnBack(Tx& tx, const std::string& actor, const char* flag, const std::string& reason) {
  SAGAD_RETURN_IF_ERROR(tx.RejectAwaitingApprovals(actor, reason));
  return tx.Saga(SagaEvent::kStartCompensation, {{"by", actor}, {flag, true}, {"reason", reason}});
}

}  // namespace

// What asked for an operator on step i (the receipt's "rule"): a guard of
// the toolbox, the tool's or step's irreversible, requires_approval or
// approval_if.
std::string OperatorActions::ApprovalRuleOf(const Instance& inst, int i) const {
  const StepState& st = inst.step(i);
  if (st.call.is_object() && st.call.contains("guard"))
    return "guard '" + st.call["guard"].value("name", "") + "'";
  const StepDefinition* step = nullptr;
  ToolboxDefinitionPtr tb;
  SagaDefinitionPtr def;
  if (inst.is_run()) {
    tb = defs_.GetToolbox(inst.saga(), inst.saga_version());
    const ToolDefinition* tool = tb ? tb->Tool(st.call.value("tool", "")) : nullptr;
    step = tool ? &tool->step : nullptr;
  } else if ((def = defs_.For(inst))) {
    step = &def->steps[i];
  }
  if (!step) return "";
  if (step->irreversible) return "irreversible";
  if (step->requires_approval) return "requires_approval";
  if (step->approval_if)
    return "approval_if " + step->approval_if->field + " " + step->approval_if->op + " " +
           DumpJson(step->approval_if->value);
  return "";
}

// Who decided on step i's approval and on what: the request's digest, the
// definition's version, the rule that asked.
nlohmann::json OperatorActions::Verdict(const Instance& inst, int i, const std::string& actor,
                                        const std::string& digest) const {
  return {{"by", actor},
          {"digest", digest},
          {"version", inst.saga_version()},
          {"rule", ApprovalRuleOf(inst, i)}};
}

Status OperatorActions::Act(const std::string& id, const Mutation& fn) {
  const uint64_t cached = repo_.CachedVersion(id);
  bool terminal = false;
  auto once = [&] {
    return repo_.Mutate(
        id,
        [&](Tx& tx) {
          terminal = IsTerminal(tx.inst().status());
          return fn(tx);
        },
        /*fence=*/nullptr);
  };
  Status s = once();
  if (StaleRefusal(id, cached, s)) s = once();
  Acted(id, cached, terminal, s);
  return s;
}

// A step (a call appended through another coordinator) the cached copy
// does not have yet is NotFound there though the store has it: the cached
// copy is dropped and the action tried once more on the store's.
bool OperatorActions::StaleRefusal(const std::string& id, uint64_t cached, const Status& s) {
  if (s.code() != StatusCode::kNotFound || cached == 0 || repo_.CachedVersion(id) != cached)
    return false;
  repo_.Evict(id);
  return true;
}

void OperatorActions::Acted(const std::string& id, uint64_t cached, bool terminal,
                            const Status& s) {
  // Unavailable: the store may have applied it all the same (a commit
  // whose answer was lost); planning again costs nothing if it did not.
  // Refused, but the load brought a newer version into this process's
  // cache (another process changed the instance): the heartbeat compares
  // that cache with the store, so it would no longer see the change; if
  // this process owns the instance, its driver must plan again now.
  bool moved = repo_.CachedVersion(id) != cached;
  if (!terminal && (s.ok() || s.code() == StatusCode::kUnavailable || moved)) wake_(id);
}

Status OperatorActions::Run(const std::string& id, Mutation fn, Done done) {
  if (!done) return Act(id, fn);
  const uint64_t cached = repo_.CachedVersion(id);
  auto terminal = std::make_shared<bool>(false);
  // Begun on the owner, after the task it runs now: an operator answered
  // from a commit (a ?wait settled in review) and acting at once must not
  // find the mark of the step action that commit ended ("a request in
  // flight"), which that task's continuation is about to release.
  RunOnOwner(id, std::move(fn), cached, terminal, std::move(done), /*again=*/true);
  return Status::Ok();
}

void OperatorActions::RunOnOwner(const std::string& id, Mutation fn, uint64_t cached,
                                 std::shared_ptr<bool> terminal, Done done, bool again) {
  repo_.MutateAsyncOnOwner(
      id,
      [terminal, fn](Tx& tx) {
        *terminal = IsTerminal(tx.inst().status());
        return fn(tx);
      },
      std::nullopt,
      [this, id, fn, cached, terminal, done = std::move(done), again](Status s) {
        if (again && StaleRefusal(id, cached, s))
          return RunOnOwner(id, fn, cached, terminal, done, /*again=*/false);
        Acted(id, cached, *terminal, s);
        done(s);
      });
}

template <typename Fn>
Mutation OperatorActions::OnStep(const std::string& id, const std::string& step, Fn fn) {
  return [id, step, fn = std::move(fn)](Tx& tx) -> Status {
    int i = tx.inst().StepIndex(step);
    if (i < 0) return NotFound("instance " + id + " has no step '" + step + "'");
    return fn(tx, i);
  };
}

template <typename Fn>
Mutation OperatorActions::WithDefinition(Fn fn) const {
  return [this, fn = std::move(fn)](Tx& tx) -> Status {
    SagaDefinitionPtr def = defs_.For(tx.inst());
    if (!def) return Internal("definition of " + tx.inst().saga() + " is not registered");
    return fn(tx, *def);
  };
}

// The digest of step i's request as it would be sent now ("" when it
// cannot be built).
std::string OperatorActions::RequestDigest(const Instance& inst, int i) const {
  SagaDefinitionPtr def = defs_.For(inst);
  if (!def || i >= static_cast<int>(def->steps.size())) return "";
  auto r = RenderStepRequest(inst, def->steps[i].forward);
  return r.ok() ? r->hash : "";
}

Status OperatorActions::Approve(const std::string& id, const std::string& step,
                                const std::string& actor, const std::string& comment, Done done) {
  return Run(id,
             OnStep(id, step,
                    [=](Tx& tx, int i) -> Status {
                      const StepState& st = tx.inst().step(i);
                      if (st.status() != StepStatus::kAwaitingApproval && st.machine.approved())
                        return Status::Ok();  // already approved: nothing to do
                      SAGAD_RETURN_IF_ERROR(MayApprove(tx.inst(), i));
                      // The approval binds to the exact request: key and args hash.
                      SagaDefinitionPtr def = defs_.For(tx.inst());
                      if (!def)
                        return FailedPrecondition("saga " + tx.inst().saga() + " version " +
                                                  std::to_string(tx.inst().saga_version()) +
                                                  " is not registered");
                      auto r = RenderStepRequest(tx.inst(), def->steps[i].forward);
                      if (!r.ok())
                        return FailedPrecondition("cannot build the request to approve: " +
                                                  r.status().message());
                      nlohmann::json data = Verdict(tx.inst(), i, actor, r->hash);
                      data["comment"] = comment;
                      data["key"] = StepKey(id, step);
                      data["args_hash"] = r->hash;
                      SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kApprove, std::move(data)));
                      if (tx.inst().status() == SagaStatus::kAwaitingApproval)
                        SAGAD_RETURN_IF_ERROR(tx.Saga(SagaEvent::kResume, {{"by", actor}}));
                      return Status::Ok();
                    }),
             std::move(done));
}

Status OperatorActions::Reject(const std::string& id, const std::string& step,
                               const std::string& actor, const std::string& reason, Done done) {
  return Run(
      id,
      OnStep(id, step,
             [=](Tx& tx, int i) -> Status {
               if (tx.inst().step(i).status() == StepStatus::kRejected) return Status::Ok();
               SAGAD_RETURN_IF_ERROR(MayReject(tx.inst(), i));
               nlohmann::json data = Verdict(tx.inst(), i, actor, RequestDigest(tx.inst(), i));
               data["reason"] = reason;
               SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kReject, std::move(data)));
               // A run's call refused: the run goes on, its agent decides what next.
               if (tx.inst().is_run())
                 return tx.inst().status() == SagaStatus::kAwaitingApproval
                            ? tx.Saga(SagaEvent::kResume, {{"by", actor}})
                            : Status::Ok();
               // The saga turns back: approvals other branches wait for are withdrawn.
               const std::string why = "step '" + step + "' rejected: " + reason;
               SAGAD_RETURN_IF_ERROR(tx.RejectAwaitingApprovals(actor, "not needed: " + why));
               return tx.Saga(SagaEvent::kStartCompensation, {{"by", actor}, {"reason", why}});
             }),
      std::move(done));
}

Status OperatorActions::Cancel(const std::string& id, const std::string& actor,
                               const std::string& reason, Done done) {
  return Run(id, WithDefinition([=](Tx& tx, const SagaDefinition& def) -> Status {
               SagaStatus ss = tx.inst().status();
               if (ss == SagaStatus::kCompensating || ss == SagaStatus::kCompensated)
                 return Status::Ok();
               SAGAD_RETURN_IF_ERROR(MayCancel(def, tx.inst()));
               return TurnBack(tx, actor, "cancelled", "cancelled: " + reason);
             }),
             std::move(done));
}

Status OperatorActions::RetryNow(const std::string& id, const std::string& step,
                                 const std::string& actor, const std::string& comment, Done done) {
  return Run(id,
             OnStep(id, step,
                    [=](Tx& tx, int i) -> Status {
                      SAGAD_RETURN_IF_ERROR(MayRetry(tx.inst(), i));
                      bool exhausted = tx.inst().status() == SagaStatus::kNeedsReview;
                      SAGAD_RETURN_IF_ERROR(tx.Note(i, StepNote::kRetryRequested,
                                                    {{"by", actor}, {"comment", comment}}));
                      if (exhausted)
                        return tx.Saga(SagaEvent::kResume, {{"by", actor}, {"step", step}});
                      return Status::Ok();
                    }),
             std::move(done));
}

Status OperatorActions::Skip(const std::string& id, const std::string& step,
                             const nlohmann::json& result, const std::string& external_ref,
                             const std::string& actor, const std::string& comment, Done done) {
  return Run(
      id,
      OnStep(id, step,
             [=](Tx& tx, int i) -> Status {
               SAGAD_RETURN_IF_ERROR(MaySkip(tx.inst(), i));
               nlohmann::json res = result.is_null() ? nlohmann::json::object() : result;
               std::string ref = !external_ref.empty() ? external_ref : ExternalRef(res);
               SAGAD_RETURN_IF_ERROR(tx.Step(
                   i, StepEvent::kSkip,
                   {{"result", res}, {"external_ref", ref}, {"by", actor}, {"comment", comment}}));
               if (tx.inst().status() == SagaStatus::kNeedsReview)
                 return tx.Saga(SagaEvent::kResume, {{"by", actor}, {"step", step}});
               return Status::Ok();
             }),
      std::move(done));
}

Status OperatorActions::ForceCompensate(const std::string& id, const std::string& actor,
                                        const std::string& reason, Done done) {
  return Run(id, WithDefinition([=](Tx& tx, const SagaDefinition& def) -> Status {
               SAGAD_RETURN_IF_ERROR(MayForceCompensate(def, tx.inst()));
               return TurnBack(tx, actor, "forced", "compensation forced: " + reason);
             }),
             std::move(done));
}

Status OperatorActions::Resolve(const std::string& id, const std::string& step,
                                const std::string& outcome, const std::string& external_ref,
                                const std::string& actor, const std::string& comment, Done done) {
  if (outcome != "committed" && outcome != "not_executed")
    return InvalidArgument("outcome must be \"committed\" or \"not_executed\"");
  nlohmann::json resolution = {{"outcome", outcome}, {"by", actor}, {"comment", comment}};
  if (!external_ref.empty()) resolution["external_ref"] = external_ref;
  return Run(
      id,
      OnStep(id, step,
             [=](Tx& tx, int i) -> Status {
               SAGAD_RETURN_IF_ERROR(MayResolve(tx.inst(), i, runs_.StepUnderWay(id, i)));
               const StepState& st = tx.inst().step(i);
               if (st.status() == StepStatus::kStarted || st.status() == StepStatus::kUnknown)
                 SAGAD_RETURN_IF_ERROR(
                     tx.Step(i, StepEvent::kEscalate, {{"error", "operator review"}}));
               if (tx.inst().step(i).status() != StepStatus::kNeedsReview)
                 return FailedPrecondition("step '" + step +
                                           "' has no unknown outcome to resolve (it is " +
                                           StepStatusName(tx.inst().step(i).status()) + ")");
               bool comp = tx.inst().step(i).machine.reviewing_compensation();
               if (outcome == "committed") {
                 if (comp) {
                   SAGAD_RETURN_IF_ERROR(
                       tx.Step(i, StepEvent::kCompensationDone, {{"resolution", resolution}}));
                 } else {
                   nlohmann::json result = {{"resolved_by_operator", true}};
                   if (!external_ref.empty()) result["ref"] = external_ref;
                   SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kCommit,
                                                 {{"result", result},
                                                  {"external_ref", external_ref},
                                                  {"resolution", resolution}}));
                 }
               } else {
                 SAGAD_RETURN_IF_ERROR(
                     tx.Step(i, StepEvent::kNotExecuted, {{"resolution", resolution}}));
               }
               return tx.Saga(SagaEvent::kResume, {{"by", actor}, {"step", step}});
             }),
      std::move(done));
}

}  // namespace sagad
