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

auto StepRunner::Compensate(const std::string& id, const SagaDefinitionPtr& defp,
                            const InstancePtr& instp, int i, const MarkPtr& mark, Done done)
    -> void {
  CheckMark(id, i, mark, "an undo");
  const SagaDefinition& def = *defp;
  const StepDefinition& sd = def.steps[i];
  const StepState& st = instp->step(i);
  if (!sd.compensation) {
    Escalate(id, i, "step '" + sd.name + "' committed but has no compensation", std::move(done));
    return;
  }
  const CallSpec& call = *sd.compensation;
  auto r = RenderStepRequest(*instp, call);
  if (!adapter_.Service(call.service) || !r.ok()) {
    std::string why = !r.ok() ? "cannot build compensation: " + r.status().message()
                              : "service '" + call.service + "' is not configured";
    TransitionAsync(
        id,
        [why, step = sd.name](Tx& tx) {
          return tx.Saga(SagaEvent::kEscalate, {{"reason", why}, {"step", step}});
        },
        std::move(done));
    return;
  }
  const std::string key = CompensationKey(id, sd.name);
  if (!st.comp_args_hash.empty() && st.comp_args_hash != r->hash) {
    TransitionAsync(
        id,
        [key](Tx& tx) {
          return tx.Saga(SagaEvent::kEscalate,
                         {{"reason", "compensation key " + key +
                                         " would be re-sent with a different body; refusing"}});
        },
        std::move(done));
    return;
  }
  auto permit =
      Admit(id, i, sd.name, call.service, st.comp_attempts > 0 && !st.budget_exempt, done);
  if (!permit) return;
  CrashPoint("before_compensation_started");
  // As Execute's: the STARTED commit's continuation sends; no thread waits
  // for that commit.
  CallRequest req{
      call.service,         call.method,          r->path,         r->body, key, id, sd.name,
      ownership_.Token(id), st.comp_attempts + 1, TraceOf(*instp), {}};
  auto slot = std::make_shared<std::optional<ServiceGates::Permit>>(std::move(permit));
  host_.CommitAsOwnerAsync(
      id,
      [i, key, hash = r->hash](Tx& tx) -> Status {
        StepStatus ss = tx.inst().step(i).status();
        if (ss != StepStatus::kCommitted && ss != StepStatus::kCompensating)
          return MovedOn("step moved on");
        return tx.Step(i, StepEvent::kBeginCompensation, {{"key", key}, {"args_hash", hash}});
      },
      [this, id, defp, i, req = std::move(req), slot, done](Status s) {
        if (!s.ok()) {
          slot->reset();  // nothing left: the service's slot is free
          done(host_.AfterFailedCommit(id, s));
          return;
        }
        CrashPoint("after_compensation_started");
        SendUndo(id, defp, i, req, slot, done);
      });
}

auto StepRunner::SendUndo(const std::string& id, const SagaDefinitionPtr& defp, int i,
                          const CallRequest& req, const PermitSlot& slot, const Done& done)
    -> void {
  auto t0 = clock_.SteadyNow();
  CallIfOwner(req, done,
              [this, id, defp, i, t0, slot, trace_id = req.trace.trace_id, done](const Status& sent,
                                                                                 CallResult res) {
                slot->reset();
                if (!sent.ok()) {
                  done(host_.AfterFailedCommit(id, sent));
                  return;
                }
                AfterUndo(id, defp, i, trace_id, t0, res, done);
              });
}

auto StepRunner::AfterUndo(const std::string& id, const SagaDefinitionPtr& defp, int i,
                           const std::string& trace_id, std::chrono::steady_clock::time_point t0,
                           const CallResult& res, const Done& done) -> void {
  const SagaDefinition& def = *defp;
  const StepDefinition& sd = def.steps[i];
  CrashPoint("before_compensation_outcome");
  metrics_.Call("compensation", res, clock_.SteadyNow() - t0,
                {def.name, sd.name, sd.compensation->service});
  EngineLog({{"msg", "compensation call"},
             {"instance", id},
             {"trace_id", trace_id},
             {"step", sd.name},
             {"key", CompensationKey(id, sd.name)},
             {"outcome", OutcomeName(res.outcome)},
             {"http_status", res.http_status}});
  TransitionAsync(
      id, [this, defp, i, res](Tx& tx) { return RecordUndo(tx, *defp, i, res); },
      [done](Next next) {
        CrashPoint("after_compensation_outcome");
        done(next);
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
  CheckMark(id, i, mark, "a question about an undo");
  const StepDefinition& sd = def->steps[i];
  const StepState& st = inst->step(i);
  const ServiceConfig* svc = sd.compensation ? adapter_.Service(sd.compensation->service) : nullptr;
  // Compensations are idempotent by contract: without a query, re-send.
  if (!svc || !QueryableFor(sd, *svc)) {
    Compensate(id, def, inst, i, mark, std::move(done));
    return;
  }
  // What follows the answer commits asynchronously (a re-sent
  // compensation's STARTED, or the answer): it runs on the reply's thread.
  Ask(sd.compensation->service, st.comp_key, id, st.comp_attempts, TraceOf(*inst), done,
      [this, id, def, inst, i, mark, done](QueryResult q) {
        metrics_.Query("compensation", q);
        if (q.outcome == QueryOutcome::kNotHappened) {
          Compensate(id, def, inst, i, mark, done);
          return;
        }
        RecordUndoAnswer(id, def, i, q, inst->step(i).comp_key, done);
      });
}

auto StepRunner::RecordUndoAnswer(const std::string& id, const SagaDefinitionPtr& defp, int i,
                                  const QueryResult& q, const std::string& comp_key, Done done)
    -> void {
  const StepDefinition& sd = defp->steps[i];
  const RetryPolicy policy = RetryFor(sd, sd.compensation->service);
  TransitionAsync(
      id,
      [this, defp, i, q, comp_key, policy](Tx& tx) -> Status {
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
      std::move(done));
}

}  // namespace sagad
