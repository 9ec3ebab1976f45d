// StepRunner: one action on one step of one instance, in the write-ahead
// order that makes every effect happen at most once:
//   Execute: the STARTED record (key, args hash, attempt) is durable before
//     the request leaves; the outcome is durable before anything else
//     happens. A committed step's outcome may carry, in the same commit, the
//     STARTED record of the next step that may go at once (no approval,
//     timer, deadline or recovery in the way); the runner then sends it
//     (one commit per step). A definite failure turns the saga (GiveUp); an
//     unclear outcome is UNKNOWN, never FAILED; "not executed" waits a
//     backoff within the retry policy and the service's retry budget.
//   Reconcile: an unclear outcome is asked about (GET operations) before any
//     re-send; "never happened" goes back to PLANNED (re-sent with the same
//     key), "happened" commits, still unknown is asked again later and goes
//     to review after max_reconciliations.
//   Compensate / ReconcileCompensation: the same for the undo.
// Every action is given its step's mark (RunTable::TryMarkStep), shared
// with the caller, who releases it when the action is done. Once begun, an
// action is one object (StepAction, step_action.h): its phase, key, attempt,
// trace, mark, permit and `done` travel together from the first commit to
// the last reply, and End lets go of them. A forward send holds its step's
// mark until the step's outcome is recorded, then lets go of it; a chained
// step's mark is taken here, in the commit that starts it, and the action
// moves on to that step (StepAction::MoveOn). So an instance whose chain
// waits for a reply holds one mark, not two (RunTable::Busy counts what
// waits for a worker). The runner never plans: its Host (the Driver)
// decides what runs next.
// No thread waits, neither for a downstream nor for a commit: every commit
// is asynchronous (Host::CommitAsOwnerAsync) and completes a continuation; an
// action sends with Adapter::CallAsync and returns; what follows the reply
// (record, chain, send the next) runs on the instance's owner thread
// (Executor::PostTo), where the commits' continuations run too; when the
// adapter answered before CallAsync returned, it goes on at once.
// Thread-safety: any number of actions at once, on different steps.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "adapters/adapter.h"
#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/instances/ownership.h"
#include "coordinator/engine/instances/run_table.h"
#include "coordinator/engine/instances/transition.h"
#include "coordinator/engine/metrics/engine_metrics.h"
#include "coordinator/engine/owners/executor.h"
#include "coordinator/engine/services/service_gates.h"
#include "coordinator/engine/steps/step_action.h"
#include "coordinator/engine/steps/step_request.h"
#include "policies/retry_budget.h"
#include "policies/retry_policy.h"
#include "sagas/definition.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/random.h"

namespace sagad {

class StepRunner {
 public:
  // What the runner asks of the one who drives the instance (Driver).
  class Host {
   public:
    // What a commit that did not happen means for the driver: a lost race
    // plans again (kContinue); a lost lease or storage trouble stops.
    virtual Next AfterFailedCommit(const std::string& id, const Status& s) = 0;
    // Plan the instance again (siblings of a chained step may have become
    // ready).
    virtual void Schedule(const std::string& id) = 0;
    // Plan the instance again after `ms` (a step whose service refused a
    // permit: paused, or at a limit).
    virtual void ScheduleAfter(const std::string& id, int64_t ms) = 0;
    // The instance's first action since a restart is done.
    virtual void MarkRecovered(const std::string& id) = 0;
    // While instances found at start-up wait to be resumed, nothing chains.
    virtual bool RecoveryInProgress() = 0;
    // Ok if a request of the instance may leave now (Ownership::ReadyToSend:
    // the lease has at least lease_ms/3 left). Asked right before every
    // send; on an error nothing is sent and the error goes to
    // AfterFailedCommit (the STARTED record is durable: it is reconciled,
    // never guessed).
    virtual Status MaySend(const std::string& id) = 0;
    // A commit as the instance's owner (fenced by this process's lease),
    // completing `done` instead of blocking (the store's CommitAsync), on
    // the instance's owner. The runner makes no other commit: no thread
    // waits while a STARTED record or an outcome is made durable.
    virtual void CommitAsOwnerAsync(const std::string& id, Mutation fn,
                                    Completion<Status> done) = 0;

   protected:
    ~Host() = default;
  };

  // How an action ends: called exactly once, with what the driver does
  // next, either before the action returns or later on an executor task.
  using Done = Completion<Next>;
  using InstancePtr = std::shared_ptr<const Instance>;

  // How many times a commit the store refuses for what it holds is tried
  // before the saga goes to NEEDS_REVIEW (Transition).
  static constexpr int kRecordTries = 3;

  // `random` seeds the jitter of backoffs and reconciliation delays.
  // `executor`: where a reply that came after its call returned goes on
  // (the instance's owner: Executor::PostTo).
  StepRunner(Adapter& adapter, const Clock& clock, const Ownership& ownership, RunTable& runs,
             EngineMetrics& metrics, ServiceGates& gates, Executor& executor, Host& host,
             Random& random = SystemRandom::Shared());

  // A step's mark, shared by the action that holds it and its caller.
  using MarkPtr = std::shared_ptr<StepMark>;

  // Each action on step i: `mark` must hold step i (checked: an action
  // without its step's mark aborts).
  void Execute(const std::string& id, const SagaDefinitionPtr& def, const InstancePtr& inst, int i,
               const MarkPtr& mark, Done done);
  void Reconcile(const std::string& id, const SagaDefinitionPtr& def, const InstancePtr& inst,
                 int i, const MarkPtr& mark, Done done);
  void Compensate(const std::string& id, const SagaDefinitionPtr& def, const InstancePtr& inst,
                  int i, const MarkPtr& mark, Done done);
  void ReconcileCompensation(const std::string& id, const SagaDefinitionPtr& def,
                             const InstancePtr& inst, int i, const MarkPtr& mark, Done done);

  // The creation of an instance of a plain list: adds to `tx` the STARTED
  // record of its first step when that may go at once (as Chain does after
  // a commit), marking the step as under way. *step is that step's mark
  // (empty if none rides) and *request its request. Once the creation is
  // durable, Send it (and release the mark); if the creation failed, just
  // release it.
  Status ChainFirst(Tx& tx, const SagaDefinition& def, StepMark* step, StepRequest* request);
  // Sends step i, whose STARTED record (attempt 1) is durable, records its
  // outcome and goes on with chained steps, as Execute does after its
  // STARTED commit; `mark` holds step i.
  void Send(const std::string& id, const SagaDefinitionPtr& def, int i, StepRequest request,
            const TraceContext& trace, const MarkPtr& mark, Done done);

 private:
  using Rendered = StepRequest;
  using ActionPtr = std::shared_ptr<StepAction>;
  using Phase = StepAction::Phase;

  // The action an entry point begins on step i (its mark checked).
  ActionPtr Begin(const std::string& id, const SagaDefinitionPtr& def, int i, const MarkPtr& mark,
                  const TraceContext& trace, Done done);
  // A continuation that ends `a` with what it is given.
  static Done EndOf(const ActionPtr& a);
  // A commit of what an action learned, `then` getting what the driver does
  // next. A write the store refuses for what it holds (Internal,
  // InvalidArgument: not a lost race, lease or outage) is tried
  // kRecordTries times, then the saga goes to NEEDS_REVIEW.
  void TransitionAsync(const std::string& id, Mutation fn, Done then, int tries = 1);
  // What a write the store refused kRecordTries times means: the saga
  // stops for a human (NEEDS_REVIEW), or after_failure if even that fails.
  void GiveUpRecording(const std::string& id, const Status& s, Done done);
  // a's step goes to NEEDS_REVIEW for `why` (EscalateStep), and a ends.
  void Escalate(const ActionPtr& a, std::string why);
  static bool RefusedWrite(const Status& s);
  // What follows a reply: `fn`, at once on the caller's thread when the
  // reply came before the call returned (an exception reaches the caller);
  // else posted to the instance's owner, where an exception is logged, the
  // instance is planned again in 5 s and the action ends.
  struct Handoff;
  void Continue(const std::shared_ptr<Handoff>& h, const ActionPtr& a, const Task& fn);
  // Runs fn; an exception (a bug) is logged, the instance is planned again
  // in 5 s and the action ends with kStop.
  void Guarded(const ActionPtr& a, const Task& fn);
  // Sends `req` (a's request) if host_.MaySend allows it and goes on with
  // k(reply), the permit freed; else a ends at once (Abandon).
  void CallIfOwner(const ActionPtr& a, const CallRequest& req, Completion<CallResult> k);
  // The request of a's call `call` (forward, undo or reconcile read) with its
  // rendered path and body: a's key, instance, step, lease and attempt.
  CallRequest RequestFor(const ActionPtr& a, const CallSpec& call, std::string path,
                         nlohmann::json body);
  // Nothing was sent, or nothing is left to send, because of `why` (a
  // commit that did not happen, the lease): the permit goes, then the
  // driver learns what `why` means (AfterFailedCommit) and `a` ends.
  void Abandon(const ActionPtr& a, const Status& why);
  // Asks `service` about a's key and attempt (Adapter::QueryAsync) and goes
  // on with k(answer), as Continue does.
  void Ask(const ActionPtr& a, const std::string& service, Completion<QueryResult> k);
  // Asks by the step's reconcile read instead (sagas/definition.h), rendered
  // from `inst`: the read's reply classified by ClassifyReadAnswer.
  void AskByRead(const ActionPtr& a, const Instance& inst, Completion<QueryResult> k);

  // The actions, once begun: Execute, Reconcile, Compensate and
  // ReconcileCompensation on `inst` as it was loaded.
  void Forward(const ActionPtr& a, const Instance& inst);
  void AskForward(const ActionPtr& a, const Instance& inst);
  void Undo(const ActionPtr& a, const Instance& inst);
  void AskUndo(const ActionPtr& a, const InstancePtr& inst);
  // The STARTED record of a's step is durable: send it, record the outcome,
  // and go on with the chained step while there is one (StepAction::MoveOn).
  // The permit (the first call's, ServiceGates) goes when its reply is in;
  // chained steps go only to services that need none.
  void SendForward(const ActionPtr& a, Rendered r);
  // Execute's write-ahead: commits the STARTED record of a's step (its key
  // and attempt, r's args hash) and, once it is durable, sends it
  // (SendForward). No thread waits for the commit; a refusal ends the
  // action (its permit freed).
  void StartThenSend(const ActionPtr& a, Rendered r);
  // What SendForward does once the reply is in.
  void AfterForward(const ActionPtr& a, const CallResult& res);

  // Records the outcome of step i's forward call: COMMITTED, FAILED (and the
  // saga turns back), UNKNOWN, or not executed (retried later within the
  // policy, else the saga turns back).
  Status RecordForward(Tx& tx, const SagaDefinition& def, int i, const CallResult& res);
  Status RecordUndo(Tx& tx, const SagaDefinition& def, int i, const CallResult& res);
  // What Undo does once the reply is in.
  void AfterUndo(const ActionPtr& a, const CallResult& res);
  // Sends a's compensation, whose STARTED record is durable, and records
  // its outcome (AfterUndo).
  void SendUndo(const ActionPtr& a, const CallRequest& req);
  // Records a reconciliation's answer about the compensation of a's step.
  void RecordUndoAnswer(const ActionPtr& a, const QueryResult& q);
  // Records a reconciliation's answer about step i's forward call.
  Status RecordNotHappened(Tx& tx, const SagaDefinition& def, int i);
  Status RecordAnswer(Tx& tx, const SagaDefinition& def, int i, const QueryResult& q,
                      const std::string& key);
  // Folds into tx, after a step committed, what follows without any call:
  // the saga's completion, or the STARTED record of the next step when it
  // is a first send that may go now. *step is that step (else -1) and
  // *request its rendered request. The chained step is marked as under way
  // before the commit (*marked, its mark; kept across retries of the
  // transition, and released by the caller if the commit did not chain it).
  Status Chain(Tx& tx, const SagaDefinition& def, StepMark* marked, int* step, Rendered* request);

  RetryPolicy RetryFor(const StepDefinition& sd, const std::string& service);
  static bool QueryableFor(const StepDefinition& sd, const ServiceConfig& svc);
  static std::string UncheckableText(const StepDefinition& sd, const std::string& key);
  static bool IdempotentFor(const StepDefinition& sd, const ServiceConfig& svc);
  // Retry budget: a re-send takes (or, when the bucket is empty, reserves) a
  // token of the service's bucket. Returns 0 if it may go now, else the wait
  // in milliseconds until its reserved token is due.
  int64_t TakeRetryToken(const std::string& service);
  // A permit of `service` for a's step (ServiceGates), held by `a`, and,
  // for a re-send, a token of its retry budget. Without them (false) the
  // action ends here: paused or at a limit, nothing is written and it is
  // planned again when a permit may be had (no budget spent waiting); an
  // empty budget defers.
  bool Admit(const ActionPtr& a, const std::string& service, bool resend);
  // Defers a re-send of a's step for `wait` ms because the budget is empty.
  void DeferRetry(const ActionPtr& a, const std::string& service, int64_t wait);
  // The args hash a step's key is bound to: that of its first send, else
  // that of its approval ("" if neither).
  static std::string BoundArgsHash(const StepState& st);
  // The trace an instance's downstream calls continue.
  static TraceContext TraceOf(const Instance& inst);
  // The runner's randomness, for the policies' jitter (policies/step_outcomes.h).
  sagad::UnitRandom Jitter();
  // Notes that the `phase` outcome of step i is still unknown; asked again
  // at `at_ms`.
  Status AskAgainLater(Tx& tx, int i, const char* phase, const std::string& error, int64_t at_ms);

  Adapter& adapter_;
  const Clock& clock_;
  const Ownership& ownership_;
  RunTable& runs_;
  EngineMetrics& metrics_;
  ServiceGates& gates_;
  Executor& executor_;
  Host& host_;
  AtomicRandom jitter_;  // the retry delays' jitter, drawn on any owner
};

}  // namespace sagad
