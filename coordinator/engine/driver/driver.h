// Driver: which instance runs next and what it does. One driver at a time
// per instance (RunTable): it takes the instance's lease if it is free or a
// dead predecessor's, runs its saga-level transitions (completion, turning
// back, waiting for a human, escalation, deadlines and approval timeouts) and
// launches its step actions on workers, each step once (StepRunner sends,
// records, reconciles and undoes it). A step action that ends plans the
// instance again; a retry or a deadline still ahead is a durable timer woken
// at its time; after a restart the instances found unfinished are resumed
// round robin (each one's first action before any runs to its end).
//
// Contract:
// - Only the owner drives: an instance whose lease another live process
//   holds is left alone (no commit, no call); a lost lease stops the driver.
// - Every commit is the owner's compare-and-swap (InstanceRepository, fenced
//   by the lease); a lost race plans again, storage trouble retries the
//   instance after a second (nothing is left without a driver).
// - An instance whose saga version is not registered is never run under
//   another: it goes to NEEDS_REVIEW.
// - Schedule is cheap and idempotent: a second call while the instance is
//   under way makes the driver run one more round, not a second driver.
//   An instance not held or not cached has its lease and copy fetched
//   first by a task nobody owns (Executor::Post), so that its owner's
//   thread does not wait for the store.
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/driver/recovery_tracker.h"
#include "coordinator/engine/instances/definition_registry.h"
#include "coordinator/engine/instances/instance_repository.h"
#include "coordinator/engine/instances/ownership.h"
#include "coordinator/engine/instances/run_table.h"
#include "coordinator/engine/metrics/engine_metrics.h"
#include "coordinator/engine/owners/executor.h"
#include "coordinator/engine/steps/step_runner.h"
#include "policies/planner.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/random.h"

namespace sagad {

class Driver final : private StepRunner::Host {
 public:
  // Every driver round, step action and wake-up is a task on `executor`;
  // `workers`: how many of them may run at once (a new instance's first
  // step rides in its creation commit only while fewer are busy);
  // `reads_may_wait`: the store's (Store::ReadsMayWait, see Schedule).
  Driver(Adapter& adapter, const DefinitionRegistry& defs, InstanceRepository& repo,
         Ownership& ownership, RunTable& runs, RecoveryTracker& recovery, EngineMetrics& metrics,
         ServiceGates& gates, const Clock& clock, Random& random, Executor& executor, int workers,
         bool reads_may_wait = false);

  // Plans the instance on a worker now (or one more round of its driver).
  void Schedule(const std::string& id) override;
  // The same, after delay_ms of the executor's time.
  void ScheduleAfter(const std::string& id, int64_t delay_ms) override;

  // A new instance of a plain list: its first step's STARTED record rides in
  // the creation commit when the step may go at once (StepRunner::Chain's
  // rules) and a worker is free, and StartCreated sends it on a worker
  // without a driver round: one commit and one planning round fewer per
  // saga. *step is -1 otherwise: graphs start with a driver round (their
  // roots start together), and so does any instance created while every
  // worker is busy (a STARTED record that waits in the queue is, after a
  // crash, a request to ask about and re-send although it never left).
  Status FirstStep(Tx& tx, const SagaDefinition& def, StepMark* step, StepRequest* request);
  // After the creation commit (`created`) or its refusal (the step's mark is
  // released, nothing is sent).
  void StartCreated(const std::string& id, const SagaDefinitionPtr& def, StepMark step,
                    StepRequest* request, const TraceContext& trace, bool created);

  // A commit as the instance's owner (fenced by the lease this process
  // holds), completing `done` on the instance's owner; no thread waits for
  // it. A fenced commit drops the instance (its lease is released here).
  void CommitAsOwnerAsync(const std::string& id, Mutation fn, Completion<Status> done) override;

 private:
  // What one round of a drive says: end the drive (kDone), end it and go to
  // the back of the queue (kYield: while a recovery is under way, after
  // each saga-level action, so every recovered instance is resumed before
  // any runs to its end), go round again (kAgain), or a commit is under
  // way whose continuation goes on with the next round (kPending).
  enum class Round { kDone, kYield, kAgain, kPending };
  void DriveLoop(const std::string& id);
  // Aborts (util/check.h) unless the calling thread is id's owner
  // (Executor::OnOwner): every round and step action of an instance runs
  // there. `what` names the work for the message.
  void CheckOwner(const std::string& id, const char* what) const;
  // Runs the instance's rounds from `round` on, `r` being what the one
  // before said: its saga-level transitions, and its step actions, each
  // launched on a worker of its own (several branches of a graph at once).
  // No round waits for a commit: one that makes a transition ends with
  // kPending and the commit's continuation (a task on the workers) resumes
  // here. Leaves the run table when the drive ends.
  void Resume(const std::string& id, int round, Round r);
  Round DriveRound(const std::string& id, int round);
  // Commits `fn` asynchronously and returns kPending; once it is durable
  // (or refused) the drive resumes with after(what it means for the driver),
  // a Round. (A template used only in driver.cc.)
  template <typename After>
  Round CommitRound(const std::string& id, int round, Mutation fn, After after);
  // A round after a transition that either stops the drive or plans again.
  static Round AgainUnlessStopped(Next next);
  // An exception out of a round (a bug): logged, the instance planned again
  // in 5 s.
  void DriverError(const std::string& id, const std::exception& e);
  // A round whose first action works on steps (or asks for approvals).
  Round StepRound(const std::string& id, int round, const SagaDefinitionPtr& def,
                  const Instance& inst, const std::vector<Action>& actions, int64_t wake_at);
  // The transition of a saga-level action (complete, compensate, wait for
  // approval, escalate, go forward); empty for any other.
  Mutation SagaTransition(const SagaDefinitionPtr& def, const Action& a);
  // How a round that took a saga-level action or ran a step goes on.
  Round AfterRound(const std::string& id, Next next);
  // An instance whose definition this process does not have goes to review.
  Round EscalateUnregistered(const std::string& id, int round, const Instance& inst);
  // Takes the instance's lease if this process does not hold it: free,
  // expired, or held by a dead predecessor of the same coordinator id. A new
  // generation means a new owner: the state is reloaded before acting.
  bool EnsureOwned(const std::string& id);
  static bool HasApprovalRequest(const std::vector<Action>& actions);
  // Records AWAITING_APPROVAL for each step that asks for it; the saga waits
  // for a human too once nothing else can run (an independent branch goes on).
  Status RequestApprovals(Tx& tx, const SagaDefinition& def, const std::vector<Action>& actions);
  // Starts each step action not already under way in this process, within
  // the saga's max_parallel; one waiting on a durable timer is woken at its
  // time. True if any was launched. For a plain list (one step at a time),
  // and for every saga while a recovery is under way, the first action is
  // marked but not posted: *here is it and *mark its step's mark, for the
  // caller to run. (Posted to the back of a queue of thousands of recovered
  // instances, the actions of the instances at its front would wait until
  // the next SIGKILL, every time.)
  bool LaunchSteps(const std::string& id, const SagaDefinition& def, const Instance& inst,
                   const std::vector<Action>& actions, int64_t wake_at, Action* here,
                   StepMark* mark);
  // One step action on a worker of its own. It holds its step's mark
  // (TryMarkStep) until it ends; then the instance is planned again.
  void RunStepTask(const std::string& id, Action a, const std::shared_ptr<StepMark>& mark);
  void RunStep(const std::string& id, const Action& a, const std::shared_ptr<StepMark>& mark,
               const StepRunner::Done& done);
  // How a step action that ends outside a drive round ends: `mark` (its
  // step's) is released, the instance's recovery noted (`recovered`) and,
  // unless the action said stop or the lease is gone, the instance planned
  // again. Called more than once, it acts once; never called, the mark is
  // released when the last copy goes.
  StepRunner::Done StepEnd(const std::string& id, std::shared_ptr<StepMark> mark, bool recovered);
  // Schedules the instance at wall time `due_ms` unless a wake-up at or
  // before it is already pending.
  void WakeAt(const std::string& id, int64_t due_ms);
  // The instance wants no wake-up (it finished, it waits for nothing with a
  // deadline, or another process drives it): its pending timer, if any, is
  // cancelled, so nothing of it stays in memory until the timer's time.
  void NoWake(const std::string& id);
  // The saga's deadline, a run's idle timeout and the approval timeouts
  // (which ran out is policies/deadlines.h's NextDeadline): the transition
  // of the one that did, else empty and *wake_at is the nearest deadline
  // still ahead (or 0).
  Mutation Deadlines(const SagaDefinition& def, const Instance& inst, int64_t* wake_at);
  // Round robin (and no chaining) while instances found at start-up wait to
  // be resumed; bounded in time so that an instance that is somehow never
  // marked cannot keep this process in that mode.
  bool RecoveryInProgress() override;
  // The first action of an instance found at start-up is done (or it needs
  // none): its recovery latency is known.
  void MarkRecovered(const std::string& id) override;
  // Ownership::ReadyToSend: the lease has at least lease_ms/3 left.
  Status MaySend(const std::string& id) override { return ownership_.ReadyToSend(id); }
  // A commit refused because the lease changed hands: the instance is dropped.
  void DropFenced(const std::string& id);
  // A driver transition that did not commit: a lost race means plan again;
  // anything else is storage trouble, retried later: after 1 s, then 2, 4
  // and 8 s while the store keeps refusing the instance's writes (a full
  // store must not turn every stuck instance into a question a second to
  // its downstream). A commit that succeeds resets the count.
  Next AfterFailedCommit(const std::string& id, const Status& s) override;
  // The delay before the next try after `id`'s latest refused commit.
  int64_t NextRetryDelay(const std::string& id);

  const DefinitionRegistry& defs_;
  InstanceRepository& repo_;
  Ownership& ownership_;
  RunTable& runs_;
  RecoveryTracker& recovery_;
  EngineMetrics& metrics_;
  const Clock& clock_;
  Executor& executor_;
  const int workers_;
  const bool reads_may_wait_;
  StepRunner steps_;
};

}  // namespace sagad
