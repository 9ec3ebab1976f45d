// StepRunner's undo of one step: Compensate (the STARTED-before-send order
// of Execute, for the compensation's own key) and ReconcileCompensation
// (ask before re-sending an undo whose outcome is unclear). The forward
// actions are in step_runner.cc; the contract in step_runner.h.
#include "coordinator/engine/instances/saga_turns.h"
#include "coordinator/engine/steps/step_runner.h"
#include "policies/step_outcomes.h"
#include "sagas/step_key.h"
#include "util/crash_point.h"
#include "util/log.h"

namespace sagad {

auto StepRunner::Compensate(const std::string& id, const SagaDefinitionPtr& def,
                            const InstancePtr& inst, int i, const MarkPtr& mark, Done done)
    -> void {
  Undo(Begin(id, def, i, mark, TraceOf(*inst), std::move(done)), *inst);
}

auto StepRunner::Undo(const ActionPtr& a, const Instance& inst) -> void {
  const std::string& id = a->id();
  const StepDefinition& sd = a->step_def();
  const StepState& st = inst.step(a->step());
  a->Begin(Phase::kUndo, CompensationKey(id, sd.name), st.comp_attempts + 1);
  a->CheckHeld();
  if (!sd.compensation) {
    Escalate(a, "step '" + sd.name + "' committed but has no compensation");
    return;
  }
  const CallSpec& call = *sd.compensation;
  auto r = RenderStepRequest(inst, call);
  if (!adapter_.Service(call.service) || !r.ok()) {
    std::string why = !r.ok() ? "cannot build compensation: " + r.status().message()
                              : "service '" + call.service + "' is not configured";
    TransitionAsync(
        id,
        [why, step = sd.name](Tx& tx) {
          return tx.Saga(SagaEvent::kEscalate, {{"reason", why}, {"step", step}});
        },
        EndOf(a));
    return;
  }
  if (!st.comp_args_hash.empty() && st.comp_args_hash != r->hash) {
    TransitionAsync(
        id,
        [key = a->key()](Tx& tx) {
          return tx.Saga(SagaEvent::kEscalate,
                         {{"reason", "compensation key " + key +
                                         " would be re-sent with a different body; refusing"}});
        },
        EndOf(a));
    return;
  }
  if (!Admit(a, call.service, st.comp_attempts > 0 && !st.budget_exempt)) return;
  CrashPoint(CrashAt::kBeforeCompensationStarted);
  // As Forward's: the STARTED commit's continuation sends; no thread waits
  // for that commit.
  CallRequest req = RequestFor(a, call, r->path, r->body);
  host_.CommitAsOwnerAsync(
      id,
      [i = a->step(), key = a->key(), hash = r->hash](Tx& tx) -> Status {
        StepStatus ss = tx.inst().step(i).status();
        if (ss != StepStatus::kCommitted && ss != StepStatus::kCompensating)
          return MovedOn("step moved on");
        return tx.Step(i, StepEvent::kBeginCompensation, {{"key", key}, {"args_hash", hash}});
      },
      [this, a, req = std::move(req)](Status s) {
        if (!s.ok()) return Abandon(a, s);
        CrashPoint(CrashAt::kAfterCompensationStarted);
        SendUndo(a, req);
      });
}

auto StepRunner::SendUndo(const ActionPtr& a, const CallRequest& req) -> void {
  a->CheckHeld();
  CallIfOwner(a, req, [this, a](CallResult res) { AfterUndo(a, res); });
}

auto StepRunner::AfterUndo(const ActionPtr& a, const CallResult& res) -> void {
  const SagaDefinitionPtr defp = a->def();
  const int i = a->step();
  const StepDefinition& sd = a->step_def();
  CrashPoint(CrashAt::kBeforeCompensationOutcome);
  metrics_.Call("compensation", res, clock_.SteadyNow() - a->sent_at(),
                EngineMetrics::LabelsOf(*defp, sd, sd.compensation->service));
  EngineLog(res.outcome == Outcome::kCommitted ? LogLevel::kDebug : LogLevel::kInfo,
            {{"msg", "compensation call"},
             {"instance", a->id()},
             {"trace_id", a->trace().trace_id},
             {"step", sd.name},
             {"key", a->key()},
             {"outcome", OutcomeName(res.outcome)},
             {"http_status", res.http_status}});
  TransitionAsync(
      a->id(), [this, defp, i, res](Tx& tx) { return RecordUndo(tx, *defp, i, res); },
      [a](Next next) {
        CrashPoint(CrashAt::kAfterCompensationOutcome);
        a->End(next);
      });
}

// The outcome of step i's compensation call: COMPENSATED, refused (review),
// unclear (asked later), or not executed (sent again within the policy,
// else review).
auto StepRunner::RecordUndo(Tx& tx, const SagaDefinition& def, int i, const CallResult& res)
    -> Status {
  const StepDefinition& sd = def.steps[i];
  switch (res.outcome) {
    case Outcome::kCommitted:
      return tx.Step(i, StepEvent::kCompensationDone,
                     {{"result", res.result}, {"external_ref", res.external_ref}});
    case Outcome::kFailed:
      SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kEscalate, {{"error", res.error}}));
      return EscalateUndo(tx, def, "compensation of '" + sd.name + "' was refused: " + res.error,
                          sd.name);
    case Outcome::kUnknown:
      return tx.Step(i, StepEvent::kCompensationUnknown, {{"error", res.error}});
    case Outcome::kNotExecuted: {
      const int n = tx.inst().step(i).comp_attempts;
      const StepNext next = CompensationNotExecuted(RetryFor(sd, sd.compensation->service), n,
                                                    clock_.NowMillis(), Jitter());
      if (next.move == StepMove::kEscalate) {
        SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kNotExecuted, {{"error", res.error}}));
        return tx.Saga(SagaEvent::kEscalate,
                       {{"reason", "compensation of '" + sd.name + "' could not be sent after " +
                                       std::to_string(n) + " attempts: " + res.error},
                        {"step", sd.name}});
      }
      return tx.Step(i, StepEvent::kNotExecuted, {{"error", res.error}, {"retry_at", next.at_ms}});
    }
  }
  return Status::Ok();
}

auto StepRunner::ReconcileCompensation(const std::string& id, const SagaDefinitionPtr& def,
                                       const InstancePtr& inst, int i, const MarkPtr& mark,
                                       Done done) -> void {
  AskUndo(Begin(id, def, i, mark, TraceOf(*inst), std::move(done)), inst);
}

auto StepRunner::AskUndo(const ActionPtr& a, const InstancePtr& inst) -> void {
  const StepDefinition& sd = a->step_def();
  const StepState& st = inst->step(a->step());
  a->Begin(Phase::kAskUndo, st.comp_key, st.comp_attempts);
  a->CheckHeld();
  const ServiceConfig* svc = sd.compensation ? adapter_.Service(sd.compensation->service) : nullptr;
  // Compensations are idempotent by contract: without a query, re-send.
  if (!svc || !QueryableFor(sd, *svc)) return Undo(a, *inst);
  // What follows the answer commits asynchronously (a re-sent
  // compensation's STARTED, or the answer), on the instance's owner.
  Ask(a, sd.compensation->service, [this, a, inst](QueryResult q) {
    metrics_.Query("compensation", q);
    if (q.outcome == QueryOutcome::kNotHappened) return Undo(a, *inst);
    RecordUndoAnswer(a, q);
  });
}

auto StepRunner::RecordUndoAnswer(const ActionPtr& a, const QueryResult& q) -> void {
  const SagaDefinitionPtr defp = a->def();
  const StepDefinition& sd = a->step_def();
  const RetryPolicy policy = RetryFor(sd, sd.compensation->service);
  TransitionAsync(
      a->id(),
      [this, defp, i = a->step(), q, comp_key = a->key(), policy](Tx& tx) -> Status {
        const SagaDefinition& def = *defp;
        const StepDefinition& sd = def.steps[i];
        if (tx.inst().step(i).status() != StepStatus::kCompensating)
          return MovedOn("step moved on");
        if (q.outcome == QueryOutcome::kHappened)
          return tx.Step(
              i, StepEvent::kCompensationDone,
              {{"result", q.result}, {"external_ref", q.external_ref}, {"reconciled", true}});
        if (q.outcome == QueryOutcome::kRefused) {
          SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kEscalate, {{"error", q.error}}));
          return EscalateUndo(tx, def, "compensation of '" + sd.name + "' was refused: " + q.error,
                              sd.name);
        }
        if (!tx.inst().step(i).machine.compensation_in_doubt())
          SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kCompensationUnknown, {{"error", q.error}}));
        const int before = tx.inst().step(i).comp_reconciliations;
        const StepNext next = StillUnclear(policy, before, clock_.NowMillis(), Jitter());
        if (next.move == StepMove::kEscalate) {
          SAGAD_RETURN_IF_ERROR(
              tx.Note(i, StepNote::kReconciled, {{"phase", "compensation"}, {"error", q.error}}));
          SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kEscalate, {{"error", q.error}}));
          return EscalateUndo(tx, def,
                              "compensation " + comp_key + " still unknown after " +
                                  std::to_string(before + 1) + " reconciliation attempts",
                              sd.name);
        }
        return AskAgainLater(tx, i, "compensation", q.error, next.at_ms);
      },
      EndOf(a));
}

}  // namespace sagad
