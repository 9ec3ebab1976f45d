// Engine::Impl: the driver, and the wiring of the parts it drives. Each
// part has a header stating its contract and unit tests of its own, and
// depends only on parts below it:
//
//   Engine (engine.h, the facade)
//     Engine::Impl, defined by concern in engine*.cc:
//       engine.cc            the facade, wiring, lifecycle (start, stop)
//       engine_reads.cc      reads (views, events, lists, approvals, bundle)
//       engine_driver.cc     the driver: which instance runs next, its
//                            saga-level transitions, step actions on workers,
//                            timers, deadlines, recovery round robin
//       engine_state.cc      commits (Mutate and what follows each), outbox
//                            messages, ownership rounds (heartbeat),
//                            retention
//     drives:
//       Submissions          new instances, Idempotency-Key replays
//       OperatorActions      approve, reject, cancel, retry, skip, force
//                            compensation, resolve
//       StepRunner           send, record, chain, reconcile, undo one step
//     over:
//       DefinitionRegistry   saga definitions by name and version
//       InstanceRepository   load, cache, compare-and-swap commit
//       Ownership            leases, fencing tokens, renewal
//       RunTable             drivers and step actions under way, wake-ups
//       RecoveryTracker      instances not yet resumed since start-up
//       EngineMetrics        counters, histograms, gauges
//       Waiters              `?wait=` callers, woken when an instance settles
//       sagas/planner.h      what to do next (pure); saga_turns.h, Tx
// Private to the engine; include only in engine*.cc.
// Thread-safety: as Engine's (coordinator/engine.h).
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "adapters/classify.h"
#include "coordinator/crash_point.h"
#include "coordinator/engine.h"
#include "coordinator/definition_registry.h"
#include "coordinator/engine_log.h"
#include "coordinator/engine_metrics.h"
#include "coordinator/saga_turns.h"
#include "coordinator/instance_repository.h"
#include "coordinator/operator_actions.h"
#include "coordinator/ownership.h"
#include "coordinator/recovery_tracker.h"
#include "coordinator/run_table.h"
#include "coordinator/step_runner.h"
#include "coordinator/submissions.h"
#include "coordinator/transition.h"
#include "coordinator/waiters.h"
#include "policies/approval_policy.h"
#include "policies/failure_policy.h"
#include "sagas/instance.h"
#include "sagas/json_limits.h"
#include "sagas/planner.h"

namespace sagad {


class Engine::Impl {
 public:
  Impl(Store& store, Adapter& adapter, Clock& clock, EngineOptions options);

  ~Impl();

  // ---- definitions ----
  Status Register(const SagaDefinition& def) { return defs_.Register(def); }

  std::vector<SagaDefinitionPtr> Definitions() const { return defs_.All(); }

  SagaDefinitionPtr Definition(const std::string& name, int version) const {
    return defs_.Get(name, version);
  }

  // ---- lifecycle ----
  Status Start();

  void Stop();

  // ---- submissions ----
  Submissions& submissions() { return submissions_; }

  // ---- reads ----
  StatusOr<nlohmann::json> GetInstance(const std::string& id);

  StatusOr<nlohmann::json> WaitSettled(const std::string& id,
                                       std::chrono::milliseconds timeout);

  void WaitSettledAsync(const std::string& id,
                        std::chrono::milliseconds timeout, Waiters::Done done);

  void CancelWaits();

  StatusOr<std::vector<Event>> GetEvents(const std::string& id);

  StatusOr<InstancePage> List(const InstanceFilter& filter, size_t limit,
                              const std::string& cursor);

  // Every step awaiting approval, oldest first, with the exact request an
  // approval lets go (the approval binds to its key and args hash).
  StatusOr<nlohmann::json> Approvals();

  // Unfinished instances by status (from the index: no snapshot is read).
  StatusOr<nlohmann::json> Counts();

  StatusOr<nlohmann::json> Bundle(const std::string& id);

  // ---- operator actions ----
  OperatorActions& operators() { return operators_; }

 private:
  // ---- scheduling ----
  // A new instance of a plain list: its first step's STARTED record rides in
  // the creation commit when the step may go at once (StepRunner::Chain's
  // rules), and StartCreated sends it on a worker without a driver round:
  // one commit and one planning round fewer per saga. Graphs start with a
  // driver round (their roots start together), and so does any instance
  // created while every worker is busy (see FirstStep).
  Status FirstStep(Tx& tx, const SagaDefinition& def, int* step,
                   StepRequest* request);
  void StartCreated(const std::string& id, const SagaDefinitionPtr& def, int step,
                    StepRequest* request, const TraceContext& trace,
                    bool created);

  void Schedule(const std::string& id);

  void ScheduleAfter(const std::string& id, int64_t delay_ms);

  void DriveLoop(const std::string& id);

  // Runs the instance's saga-level transitions (completion, turning back,
  // waiting for a human) and launches its step actions, each on a worker of
  // its own (several branches of a graph at once); a step action that ends
  // schedules the instance again. While a recovery is under way, returns
  // true after each saga-level action: the caller puts the instance back at
  // the end of the queue, so every recovered instance is resumed before any
  // runs to its end.
  bool Drive(const std::string& id);

  static bool HasApprovalRequest(const std::vector<Action>& actions);

  // Records AWAITING_APPROVAL for each step that asks for it; the saga waits
  // for a human too once nothing else can run (an independent branch goes on).
  Status RequestApprovals(Tx& tx, const SagaDefinition& def,
                          const std::vector<Action>& actions);

  // Starts each step action not already under way in this process, within
  // the saga's max_parallel; one waiting on a durable timer is woken at its
  // time. True if any was launched. For a plain list (one step at a time),
  // and for every saga while a recovery is under way, the first action is
  // marked but not posted: *here is it, for the caller to run. (Posted to
  // the back of a queue of thousands of recovered instances, the actions of
  // the instances at its front would wait until the next SIGKILL, every time.)
  bool LaunchSteps(const std::string& id, const SagaDefinition& def,
                   const Instance& inst, const std::vector<Action>& actions,
                   int64_t wake_at, Action* here);

  // One step action on a worker of its own. Its step is marked as under way
  // (TryMarkStep) until it ends; then the instance is planned again.
  void RunStepTask(const std::string& id, Action a);

  Next RunStep(const std::string& id, const Action& a);

  // Schedules the instance at wall time `due_ms` unless a wake-up at or
  // before it is already pending.
  void WakeAt(const std::string& id, int64_t due_ms);

  // Saga deadline and approval timeouts. True if it acted (`next` says how
  // to go on); otherwise *wake_at is the nearest deadline still ahead (or 0).
  bool Deadlines(const std::string& id, const SagaDefinition& def,
                 const Instance& inst, Next* next, int64_t* wake_at);

  // The first action of an instance found at start-up is done (or it needs
  // none): its recovery latency is known.
  // Round robin (and no chaining) while instances found at start-up wait to
  // be resumed; bounded in time so that an instance that is somehow never
  // marked cannot keep this process in that mode.
  bool RecoveryInProgress();

  // An instance this process will not resume (owned elsewhere, unreadable).
  void ForgetRecovery(const std::string& id);

  void MarkRecovered(const std::string& id);

  // A transition the driver wants; on a lost race it simply plans again.
  Next Transition(const std::string& id, const std::function<Status(Tx&)>& fn);

  // A driver transition that did not commit: a lost race means plan again;
  // anything else is storage trouble, retried later.
  Next AfterFailedMutate(const std::string& id, const Status& s);

  // ---- outbox ----
  // What others may care about, as outbox messages (empty without webhooks).
  std::vector<nlohmann::json> OutboxMessages(const Instance& inst,
                                             const std::vector<Event>& events);

  // ---- metrics ----
 public:
  std::string MetricsText();

 private:
  // ---- ownership ----
  // Takes the instance's lease if this process does not hold it: free,
  // expired, or held by a dead predecessor of the same coordinator id. A new
  // generation means a new owner: reload the state before acting.
  bool EnsureOwned(const std::string& id);

  // Every lease_ms/3: renew what this process owns, forget what it lost,
  // pick up instances whose owner stopped heartbeating, and notice changes
  // another process committed (an approval that came in over its API).
  void Heartbeat();

  // ---- retention ----
  // Deletes what finished more than retention_ms ago, 100 instances per
  // write transaction and at most 50 transactions per round, once a second
  // (or sooner for a short retention): short transactions, since on LMDB
  // the writer lock is shared by every process.
  void Sweep();

  void ScheduleSweep();

  void ScheduleHeartbeat();

  // ---- state ----
  StatusOr<std::shared_ptr<const Instance>> Load(const std::string& id);

  // Applies fn's events to a copy and commits them with compare-and-swap
  // (InstanceRepository::Mutate). `as_owner`: a driver transition, fenced by
  // this process's lease.
  Status Mutate(const std::string& id, const std::function<Status(Tx&)>& fn,
                bool as_owner = false);

  // After each commit (under the instance's lock): a finished instance's
  // lease is gone, webhooks and waiters hear of it, metrics count it.
  void Committed(const InstanceRepository::Commit& c);

  Store& store_;

 public:
  Store& store();

 private:
  Adapter& adapter_;
  Clock& clock_;
  EngineOptions options_;

  DefinitionRegistry defs_;

  EngineMetrics metrics_;
  Ownership ownership_;
  InstanceRepository repo_;
  RunTable runs_;
  RecoveryTracker recovery_;
  OperatorActions operators_;
  Submissions submissions_;

  StepRunner steps_;

  boost::asio::thread_pool pool_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type>
      work_;
  std::thread timer_thread_;
  Waiters waiters_{store_, io_, pool_};  // after the timers and workers it uses
};

}  // namespace sagad
