#include "coordinator/engine/steps/step_runner.h"

#include <algorithm>

#include "adapters/classify.h"
#include "coordinator/engine/instances/saga_turns.h"
#include "policies/failure_policy.h"
#include "policies/planner.h"
#include "policies/step_outcomes.h"
#include "sagas/step_key.h"
#include "util/check.h"
#include "util/crash_point.h"
#include "util/log.h"

namespace sagad {
namespace {

bool IsRetryableSendState(StepStatus s) {
  return s == StepStatus::kPlanned || s == StepStatus::kStarted || s == StepStatus::kUnknown;
}

}  // namespace

StepRunner::StepRunner(Adapter& adapter, const Clock& clock, const Ownership& ownership,
                       RunTable& runs, EngineMetrics& metrics, ServiceGates& gates,
                       Executor& executor, Host& host, Random& random)
    : adapter_(adapter),
      clock_(clock),
      ownership_(ownership),
      runs_(runs),
      metrics_(metrics),
      gates_(gates),
      executor_(executor),
      host_(host),
      jitter_(random.Next()) {}

auto StepRunner::TransitionAsync(const std::string& id, Mutation fn, Completion<Next> then,
                                 int tries) -> void {
  host_.CommitAsOwnerAsync(id, fn, [this, id, fn, then, tries](Status s) {
    if (RefusedWrite(s) && tries < kRecordTries) {
      TransitionAsync(id, fn, then, tries + 1);
      return;
    }
    if (RefusedWrite(s)) {
      GiveUpRecording(id, s, then);
      return;
    }
    then(s.ok() ? Next::kContinue : host_.AfterFailedCommit(id, s));
  });
}

auto StepRunner::GiveUpRecording(const std::string& id, const Status& s, Done done) -> void {
  // The store keeps refusing what this transition writes: never loop on
  // it. The saga stops for a human (the step keeps its last recorded
  // state: what the call did is in the log line below and the bundle).
  EngineLog(LogLevel::kError,
            {{"msg", "outcome cannot be recorded"}, {"instance", id}, {"error", s.ToString()}});
  host_.CommitAsOwnerAsync(
      id,
      [why = s.message()](Tx& tx) -> Status {
        SagaStatus ss = tx.inst().status();
        if (ss == SagaStatus::kNeedsReview || IsTerminal(ss)) return Status::Ok();
        return tx.Saga(
            SagaEvent::kEscalate,
            {{"reason", "an outcome could not be recorded after " + std::to_string(kRecordTries) +
                            " tries (the store refused the write: " + why + ")"}});
      },
      [this, id, s, done](Status e) {
        done(e.ok() ? Next::kStop : host_.AfterFailedCommit(id, s));
      });
}

auto StepRunner::Escalate(const ActionPtr& a, std::string why) -> void {
  TransitionAsync(
      a->id(), [i = a->step(), why = std::move(why)](Tx& tx) { return EscalateStep(tx, i, why); },
      EndOf(a));
}

auto StepRunner::Begin(const std::string& id, const SagaDefinitionPtr& def, int i,
                       const MarkPtr& mark, const TraceContext& trace, Done done) -> ActionPtr {
  return std::make_shared<StepAction>(id, def, i, mark, trace, std::move(done));
}

auto StepRunner::EndOf(const ActionPtr& a) -> Done {
  return [a](Next next) { a->End(next); };
}

auto StepRunner::RefusedWrite(const Status& s) -> bool {
  return s.code() == StatusCode::kInternal || s.code() == StatusCode::kInvalidArgument;
}

auto StepRunner::ChainFirst(Tx& tx, const SagaDefinition& def, StepMark* step, StepRequest* request)
    -> Status {
  *step = StepMark();
  int chained = -1;
  SAGAD_RETURN_IF_ERROR(Chain(tx, def, step, &chained, request));
  if (chained < 0) step->Release();  // marked, but the transition did not start it
  return Status::Ok();
}

auto StepRunner::Send(const std::string& id, const SagaDefinitionPtr& def, int i,
                      StepRequest request, const TraceContext& trace, const MarkPtr& mark,
                      Done done) -> void {
  ActionPtr a = Begin(id, def, i, mark, trace, std::move(done));
  a->Begin(Phase::kSend, StepKey(id, def->steps[i].name), 1);
  SendForward(a, std::move(request));
}

auto StepRunner::Jitter() -> sagad::UnitRandom {
  return [this] { return jitter_.NextDouble(); };
}

auto StepRunner::AskAgainLater(Tx& tx, int i, const char* phase, const std::string& error,
                               int64_t at_ms) -> Status {
  return tx.Note(i, StepNote::kReconciled,
                 {{"phase", phase}, {"error", error}, {"retry_at", at_ms}});
}

auto StepRunner::TraceOf(const Instance& inst) -> TraceContext {
  return TraceContext::FromJson(inst.trace());
}

auto StepRunner::RetryFor(const StepDefinition& sd, const std::string& service) -> RetryPolicy {
  const ServiceConfig* svc = adapter_.Service(service);
  return EffectiveRetry(sd, svc ? svc->retry : RetryPolicy{});
}

auto StepRunner::QueryableFor(const StepDefinition& sd, const ServiceConfig& svc) -> bool {
  return sd.queryable.value_or(svc.queryable);
}

auto StepRunner::IdempotentFor(const StepDefinition& sd, const ServiceConfig& svc) -> bool {
  return sd.idempotent.value_or(svc.idempotent);
}

auto StepRunner::BoundArgsHash(const StepState& st) -> std::string {
  if (!st.args_hash.empty()) return st.args_hash;
  return st.approval.is_object() ? st.approval.value("args_hash", "") : "";
}

auto StepRunner::Execute(const std::string& id, const SagaDefinitionPtr& def,
                         const InstancePtr& inst, int i, const MarkPtr& mark, Done done) -> void {
  Forward(Begin(id, def, i, mark, TraceOf(*inst), std::move(done)), *inst);
}

auto StepRunner::Forward(const ActionPtr& a, const Instance& inst) -> void {
  const int i = a->step();
  const StepDefinition& sd = a->step_def();
  const StepState& st = inst.step(i);
  const ServiceConfig* svc = adapter_.Service(sd.forward.service);
  a->Begin(Phase::kSend, StepKey(a->id(), sd.name), st.attempts + 1);
  a->CheckHeld();
  auto r = RenderStepRequest(inst, sd.forward);
  if (!svc || !r.ok()) {
    // Never sent: a human decides (a request is never rendered from a value
    // that is not there, nor sent to a service nobody configured).
    std::string why = "step '" + sd.name + "' was not sent: " +
                      (!svc ? "service '" + sd.forward.service + "' is not configured"
                            : "cannot build its request: " + r.status().message());
    Escalate(a, why);
    return;
  }
  std::string bound = BoundArgsHash(st);
  if (!bound.empty() && bound != r->hash) {
    Escalate(a, "idempotency key " + a->key() +
                    " would be sent with a different body than it is bound to "
                    "(first send or approval); refusing");
    return;
  }
  // Paused, or at one of its limits: nothing is written, the step stays
  // where it is and is planned again when a permit may be had. Asked before
  // the retry budget, so that waiting spends none of it.
  const bool resend = (st.attempts > 0 || st.retries > 0) && !st.budget_exempt;
  if (!Admit(a, sd.forward.service, resend)) return;
  StartThenSend(a, std::move(*r));
}

auto StepRunner::StartThenSend(const ActionPtr& a, Rendered r) -> void {
  // The STARTED commit's continuation sends the request: no worker waits
  // for that fsync. It runs on the instance's owner (the send is a socket
  // write: nothing there blocks; a refusal only ends the action, which
  // frees the service's slot).
  CrashPoint(CrashAt::kBeforeStarted);
  auto request = std::make_shared<Rendered>(std::move(r));
  host_.CommitAsOwnerAsync(
      a->id(),
      [i = a->step(), key = a->key(), hash = request->hash](Tx& tx) -> Status {
        const Instance& cur = tx.inst();
        // A run's call the store does not hold (its append was lost with a
        // write the store acknowledged: found by the simulator's lying fsync).
        if (static_cast<size_t>(i) >= cur.steps().size()) return MovedOn("step is not stored");
        StepStatus ss = cur.step(i).status();
        if (!IsRetryableSendState(ss)) return MovedOn("step moved on");
        if (ss == StepStatus::kPlanned && cur.status() != SagaStatus::kRunning)
          return MovedOn("saga is no longer running");
        return tx.Step(i, StepEvent::kStart,
                       {{"key", key}, {"args_hash", hash}, {"attempt", cur.step(i).attempts + 1}});
      },
      [this, a, request](Status s) {
        if (!s.ok()) return Abandon(a, s);
        CrashPoint(CrashAt::kAfterStarted);
        // An exception (a bug) must not reach the store's thread.
        Guarded(a, [&] { SendForward(a, std::move(*request)); });
      });
}

auto StepRunner::SendForward(const ActionPtr& a, Rendered r) -> void {
  a->CheckHeld();
  CallRequest req = RequestFor(a, a->step_def().forward, std::move(r.path), std::move(r.body));
  CallIfOwner(a, req, [this, a](CallResult res) { AfterForward(a, res); });
}

auto StepRunner::AfterForward(const ActionPtr& a, const CallResult& res) -> void {
  const SagaDefinitionPtr defp = a->def();
  const int i = a->step();
  const StepDefinition& sd = a->step_def();
  CrashPoint(CrashAt::kBeforeOutcome);
  host_.MarkRecovered(a->id());  // resumed: its first step after a restart was sent
  const auto took = clock_.SteadyNow() - a->sent_at();
  metrics_.Call("forward", res, took, EngineMetrics::LabelsOf(*defp, sd, sd.forward.service));
  // A call that went as asked is routine (debug); any other outcome is not.
  EngineLog(res.outcome == Outcome::kCommitted ? LogLevel::kDebug : LogLevel::kInfo,
            {{"msg", "step call"},
             {"instance", a->id()},
             {"trace_id", a->trace().trace_id},
             {"step", sd.name},
             {"key", a->key()},
             {"attempt", a->attempt()},
             {"outcome", OutcomeName(res.outcome)},
             {"http_status", res.http_status},
             {"ms", std::chrono::duration_cast<std::chrono::milliseconds>(took).count()}});
  // What the outcome's commit chained (Chain): the next step marked and
  // started in the same commit, and its request.
  struct Chained {
    int step = -1;
    StepMark marked;
    Rendered request;
    SagaDefinitionPtr def;  // the chained step's (a run's may have grown since defp)
  };
  auto c = std::make_shared<Chained>();
  TransitionAsync(
      a->id(),
      [this, defp, i, res, c](Tx& tx) -> Status {
        c->step = -1;
        SAGAD_RETURN_IF_ERROR(RecordForward(tx, *defp, i, res));
        if (res.outcome != Outcome::kCommitted) return Status::Ok();
        SAGAD_RETURN_IF_ERROR(Chain(tx, *defp, &c->marked, &c->step, &c->request));
        c->def = defp->run && tx.inst().is_run() ? tx.inst().run_definition() : defp;
        if (c->step >= 0)
          CrashPoint(CrashAt::kBeforeStarted);  // the next STARTED is not durable yet
        return Status::Ok();
      },
      [this, a, c](Next next) {
        CrashPoint(CrashAt::kAfterOutcome);
        // Marked but not started (the commit chained another step, or none
        // stood), or the action stops: that mark goes.
        if (next == Next::kStop || c->step != c->marked.step()) c->marked.Release();
        if (next == Next::kStop || c->step < 0) return a->End(next);
        const bool chain = a->def()->IsChain();
        // Its outcome is recorded: the chained step's mark goes on.
        a->MoveOn(c->def, std::move(c->marked));
        a->Begin(Phase::kSend, StepKey(a->id(), a->step_def().name), 1);
        CrashPoint(CrashAt::kAfterStarted);
        if (!chain) host_.Schedule(a->id());  // siblings that became ready start beside it
        SendForward(a, std::move(c->request));
      });
}

auto StepRunner::RecordForward(Tx& tx, const SagaDefinition& def, int i, const CallResult& res)
    -> Status {
  const StepDefinition& sd = def.steps[i];
  switch (res.outcome) {
    case Outcome::kCommitted:
      return tx.Step(i, StepEvent::kCommit,
                     {{"result", res.result},
                      {"external_ref", res.external_ref},
                      {"http_status", res.http_status},
                      {"replayed", res.replayed}});
    case Outcome::kFailed:
      SAGAD_RETURN_IF_ERROR(
          tx.Step(i, StepEvent::kFail, {{"error", res.error}, {"http_status", res.http_status}}));
      return GiveUp(tx, def,
                    "step '" + sd.name + "' was refused by service '" + sd.forward.service +
                        "': " + res.error);
    case Outcome::kUnknown:
      return tx.Step(i, StepEvent::kOutcomeUnknown,
                     {{"error", res.error}, {"http_status", res.http_status}});
    case Outcome::kNotExecuted: {
      const StepState& cur = tx.inst().step(i);
      const StepNext next = ForwardNotExecuted(sd, RetryFor(sd, sd.forward.service), cur,
                                               clock_.NowMillis(), Jitter());
      if (next.move == StepMove::kGiveUp)
        return NoMoreSends(tx, def, i, {{"error", res.error}, {"http_status", res.http_status}},
                           "step '" + sd.name + "' could not be sent after " +
                               std::to_string(cur.retries) + " attempts: " + res.error);
      if (next.move == StepMove::kRetry)
        return tx.Step(i, StepEvent::kNotExecuted,
                       {{"error", res.error}, {"retry_at", next.at_ms}});
      // An earlier send's outcome is unknown: the step stays UNKNOWN (never
      // PLANNED, which would mean "never happened" to a compensation), then
      // review. (Found by the simulator: a 429 after a lost reply turned an
      // applied step into PLANNED.)
      const std::string in_doubt = "not executed (" + res.error + "), and an earlier send of " +
                                   cur.key + " has an unknown outcome";
      if (next.move == StepMove::kEscalate) return EscalateStep(tx, i, in_doubt);
      return tx.Step(i, StepEvent::kOutcomeUnknown,
                     {{"error", in_doubt}, {"retry_at", next.at_ms}});
    }
  }
  return Status::Ok();
}

auto StepRunner::Chain(Tx& tx, const SagaDefinition& given, StepMark* marked, int* step,
                       Rendered* request) -> Status {
  const Instance& inst = tx.inst();
  // A run may have a call more than the definition this step started with.
  const SagaDefinition& def = CurrentDefinition(given, inst);
  std::vector<Action> actions = NextActions(def, inst);
  if (actions.front().kind == ActionKind::kComplete) return tx.Saga(SagaEvent::kComplete);
  if (host_.RecoveryInProgress()) return Status::Ok();  // others wait to be resumed first
  if (inst.status() != SagaStatus::kRunning) return Status::Ok();
  if (def.deadline_ms > 0 && PivotInPlay(def, inst) < 0 &&
      clock_.NowMillis() >= inst.created_at() + def.deadline_ms)
    return Status::Ok();
  for (const Action& a : actions) {
    if (a.kind != ActionKind::kExecute) continue;
    const StepState& st = inst.step(a.step);
    if (st.status() != StepStatus::kPlanned || st.attempts > 0 || st.retries > 0 || st.retry_at > 0)
      continue;
    const StepDefinition& sd = def.steps[a.step];
    if (!adapter_.Service(sd.forward.service)) continue;
    // A paused or limited service: the driver takes a permit first (Execute).
    if (!gates_.Open(sd.forward.service)) continue;
    auto r = RenderStepRequest(inst, sd.forward);
    if (!r.ok()) continue;
    std::string bound = BoundArgsHash(st);
    if (!bound.empty() && bound != r->hash) continue;
    if (a.step != marked->step()) {
      // The step that just committed still counts until it is released.
      StepMark m = runs_.TryMarkStep(inst.id(), a.step, def.max_parallel + 1);
      if (!m) continue;
      *marked = std::move(m);  // a step marked by an earlier try of this commit is released
    }
    SAGAD_RETURN_IF_ERROR(
        tx.Step(a.step, StepEvent::kStart,
                {{"key", StepKey(inst.id(), sd.name)}, {"args_hash", r->hash}, {"attempt", 1}}));
    *step = a.step;
    *request = std::move(*r);
    return Status::Ok();
  }
  return Status::Ok();
}

auto StepRunner::Reconcile(const std::string& id, const SagaDefinitionPtr& def,
                           const InstancePtr& inst, int i, const MarkPtr& mark, Done done) -> void {
  AskForward(Begin(id, def, i, mark, TraceOf(*inst), std::move(done)), *inst);
}

auto StepRunner::AskForward(const ActionPtr& a, const Instance& inst) -> void {
  const StepDefinition& sd = a->step_def();
  const StepState& st = inst.step(a->step());
  a->Begin(Phase::kAsk, st.key, st.attempts);
  a->CheckHeld();
  const ServiceConfig* svc = adapter_.Service(sd.forward.service);
  if (!svc) {
    Escalate(a, "outcome unknown and service '" + sd.forward.service + "' is not configured");
    return;
  }
  if (!sd.reconcile && !QueryableFor(sd, *svc)) {
    if (IdempotentFor(sd, *svc)) return Forward(a, inst);  // same key: deduplicated
    Escalate(a, UncheckableText(sd, st.key));
    return;
  }
  // The answer is recorded with an asynchronous commit: no thread waits for
  // it, and the action ends when it is durable.
  auto answered = [this, a](QueryResult q) {
    metrics_.Query("forward", q);
    EngineLog({{"msg", "reconcile"},
               {"instance", a->id()},
               {"step", a->step_def().name},
               {"key", a->key()},
               {"answer", QueryOutcomeName(q.outcome)}});
    const SagaDefinitionPtr def = a->def();
    const int i = a->step();
    if (q.outcome == QueryOutcome::kNotHappened) {
      TransitionAsync(
          a->id(), [this, def, i](Tx& tx) { return RecordNotHappened(tx, *def, i); }, EndOf(a));
      return;
    }
    TransitionAsync(
        a->id(),
        [this, def, i, q, key = a->key()](Tx& tx) { return RecordAnswer(tx, *def, i, q, key); },
        EndOf(a));
  };
  if (sd.reconcile) return AskByRead(a, inst, std::move(answered));
  Ask(a, sd.forward.service, std::move(answered));
}

// What a human must check when nothing can tell whether a forward happened.
auto StepRunner::UncheckableText(const StepDefinition& sd, const std::string& key) -> std::string {
  if (sd.forward.IsMcp())
    return "outcome of " + key + " is unknown: tool '" + sd.forward.path + "' on MCP server '" +
           sd.forward.service +
           "' may or may not have acted, and the tool names no reconcile read; a human must "
           "check on that server whether the call took effect (the arguments are in the step's "
           "request)";
  return "outcome of " + key +
         " is unknown and the service can neither be asked nor deduplicates; a human must check";
}

// It never happened: back to PLANNED. Running, it is sent again with the same
// key after a backoff, within max_attempts sends (a downstream that keeps
// answering unclearly is not hammered); turning back, there is nothing to
// send or undo.
auto StepRunner::RecordNotHappened(Tx& tx, const SagaDefinition& def, int i) -> Status {
  const StepDefinition& sd = def.steps[i];
  const StepState& cur = tx.inst().step(i);
  if (cur.status() != StepStatus::kStarted && cur.status() != StepStatus::kUnknown)
    return MovedOn("step moved on");
  const std::string why = "confirmed not executed after: " + cur.last_error;
  const StepNext next = ForwardNeverHappened(sd, RetryFor(sd, sd.forward.service), cur,
                                             tx.inst().status() == SagaStatus::kRunning,
                                             clock_.NowMillis(), Jitter());
  switch (next.move) {
    case StepMove::kStop:
      return tx.Step(i, StepEvent::kNotExecuted, {{"error", "confirmed not executed"}});
    case StepMove::kGiveUp:
      return NoMoreSends(tx, def, i, {{"error", why}},
                         "step '" + sd.name + "' did not take effect in " +
                             std::to_string(cur.attempts) + " attempts: " + why);
    default: {
      nlohmann::json data = {{"error", why}, {"retry_at", next.at_ms}};
      if (next.interrupted) data["interrupted"] = true;
      return tx.Step(i, StepEvent::kNotExecuted, data);
    }
  }
}

// Committed, refused, or still unclear (asked again later, up to the policy's
// reconciliations, then review).
auto StepRunner::RecordAnswer(Tx& tx, const SagaDefinition& def, int i, const QueryResult& q,
                              const std::string& key) -> Status {
  const StepDefinition& sd = def.steps[i];
  StepStatus ss = tx.inst().step(i).status();
  if (ss != StepStatus::kStarted && ss != StepStatus::kUnknown) return MovedOn("step moved on");
  if (q.outcome == QueryOutcome::kHappened)
    return tx.Step(i, StepEvent::kCommit,
                   {{"result", q.result}, {"external_ref", q.external_ref}, {"reconciled", true}});
  if (q.outcome == QueryOutcome::kRefused) {
    // Received and definitely refused: nothing happened, nothing is re-sent
    // (the key is spent on the refusal).
    SAGAD_RETURN_IF_ERROR(
        tx.Step(i, StepEvent::kConfirmRefused, {{"error", q.error}, {"reconciled", true}}));
    return GiveUp(tx, def, "step '" + sd.name + "' was refused: " + q.error);
  }
  if (ss == StepStatus::kStarted)
    SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kOutcomeUnknown, {{"error", q.error}}));
  const int before = tx.inst().step(i).reconciliations;
  const StepNext next =
      StillUnclear(RetryFor(sd, sd.forward.service), before, clock_.NowMillis(), Jitter());
  if (next.move == StepMove::kEscalate) {
    SAGAD_RETURN_IF_ERROR(
        tx.Note(i, StepNote::kReconciled, {{"phase", "forward"}, {"error", q.error}}));
    return EscalateStep(tx, i,
                        "outcome of " + key + " still unknown after " + std::to_string(before + 1) +
                            " reconciliation attempts: " + q.error);
  }
  return AskAgainLater(tx, i, "forward", q.error, next.at_ms);
}

}  // namespace sagad
