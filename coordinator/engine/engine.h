// Engine: runs saga instances. It owns the registered definitions, drives each
// instance with the planner (policies/planner.h), carries out the actions through
// the Adapter and records every transition durably in the Store before the
// next thing happens:
//   STARTED is durable before a request leaves; an outcome is durable before
//   the next step starts (a committed step's outcome and the next step's
//   STARTED record may share one commit); an unclear outcome is reconciled
//   (asked) before any re-send; a COMMITTED step is never executed again.
// One driver per instance at a time; many instances concurrently on a bounded
// worker pool, with backoff timers: every task and timer goes through an
// Executor (executor.h; by default `workers` shard threads, each the owner
// of the instances whose ids hash to it, with its timers; the
// simulator's runs everything on one thread).
// After a restart, instances found unfinished are resumed round robin (one
// action each, then the back of the queue) until all were resumed.
// Operator and client actions (submit, approve, reject, cancel, resolve) are
// transitions too, serialised per instance and checked by compare-and-swap.
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "adapters/adapter.h"
#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/submit_outcome.h"
#include "coordinator/store/store.h"
#include "sagas/definition.h"
#include "sagas/toolbox.h"
#include "util/clock.h"
#include "util/status.h"

namespace sagad {

class Executor;  // coordinator/engine/owners/executor.h
class Random;    // util/random.h

struct EngineOptions {
  int workers = 16;  // owner shards (sagad passes its config's: the cores)
  // Threads for nobody's work, which may wait for the store: heartbeats,
  // retention, waiters' looks at the store, and sagad's API handlers
  // (PostHouse). At least 2: a heartbeat is not held up by one look at a
  // store that does not answer (each bounded by the store's deadline).
  int house_threads = 2;
  bool outbox = false;  // write outbox messages (when webhooks are configured)
  // Ownership: this process's stable name (unique among live processes on a
  // data dir; a restart under the same name takes its leases back at once)
  // and how long a lease lasts without a heartbeat.
  std::string coordinator_id = "sagad";
  int64_t lease_ms = 10000;
  Task on_outbox;  // called after a commit that may have added some
  // Retention: finished instances are deleted this long after they finished
  // (0: kept forever), by a sweeper in batches of 100.
  int64_t retention_ms = 0;
  // Where the engine's tasks and timers run, and its random numbers (ids,
  // jitter). Null: `workers` shard threads with their timers, and
  // the system's randomness. The simulator (coordinator/sim/) passes its
  // own, single-threaded and seeded; they must outlive the engine.
  Executor* executor = nullptr;
  Random* random = nullptr;
};

class Engine {
 public:
  Engine(Store& store, Adapter& adapter, Clock& clock, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Registers a validated definition. AlreadyExists for a known name+version
  // with a different body; InvalidArgument if it fails validation.
  Status Register(const SagaDefinition& def);
  std::vector<SagaDefinitionPtr> Definitions() const;
  // The definition of `name` at `version` (0: the newest), or nullptr.
  SagaDefinitionPtr Definition(const std::string& name, int version) const;

  // Recovery: schedules every non-terminal instance. Call once.
  Status Start();
  // Stops taking work, lets in-flight actions record their outcome (no step
  // action starts: nothing is planned or chained once stopping), returns
  // when no driver runs and no step is marked under way. Idempotent.
  void Stop();

  // Creates an instance of `saga` at `version` (0: the newest registered),
  // without waiting for the creation's commit: `done` gets the outcome, on
  // a worker (or inside this call when the submission is refused or
  // replayed before anything is written). NotFound (unknown saga or
  // version), InvalidArgument (input not an object / missing fields). With
  // a client key: replay (same request hash), AlreadyExists (the key was
  // used with another request), FailedPrecondition (the first is still in
  // flight). `trace` is kept with the instance: every downstream call
  // continues it. `by`: the principal submitting (its owner: docs/agents.md,
  // ownership). Nothing in the engine waits: a caller that must block (a
  // test) waits on `done` itself.
  void SubmitAsync(const std::string& saga, int version, const nlohmann::json& input,
                   const std::string& client_key, const std::string& request_hash,
                   const TraceContext& trace, const std::string& by,
                   Completion<StatusOr<SubmitOutcome>> done);
  // Stores the response of a submission (first one wins; status 0: no
  // response was given, nothing is stored) and ends its in-flight window,
  // without waiting for the write: `then` (optional) runs once it is done,
  // on the store's thread or inside this call; it must not block.
  void FinishSubmission(const std::string& client_key, int status, const nlohmann::json& response,
                        Task then = nullptr);

  // The instance view; NotFound.
  StatusOr<nlohmann::json> GetInstance(const std::string& id);
  // What a caller needs to know of an instance before acting on it (whose
  // it is, what it runs), typed: from the engine's copy of an unfinished
  // instance (no store read, no view built), else from its stored snapshot.
  struct Head {
    bool run = false;  // an agent run (its toolbox in `saga`), else a saga
    std::string saga;
    int saga_version = 0;
    std::string owner;  // the principal that created it
  };
  StatusOr<Head> GetHead(const std::string& id);
  // Waits, without blocking a thread, until the instance is terminal or
  // waits for a human, or `timeout`: calls `done` once, from some thread
  // (possibly before it returns), unless CancelWaits comes first or the
  // returned function is called (it drops the wait; once it returns, `done`
  // has run or never will, and it says true when never: a long poll whose
  // client went away).
  // With `until`, waits for that (judged on the view) instead.
  using WaitUntil = std::function<bool(const nlohmann::json&)>;
  CancelWait WaitSettledAsync(const std::string& id, std::chrono::milliseconds timeout,
                              Completion<StatusOr<nlohmann::json>> done, WaitUntil until = nullptr);
  // `?until=decided`: the instance (or run) has no decision to come: ended,
  // in review, or a run whose every call is COMMITTED, FAILED, REJECTED,
  // CANCELLED, COMPENSATED or NEEDS_REVIEW; or that for one call of a run.
  static WaitUntil Decided();
  static WaitUntil CallDecided(const std::string& call_id);
  // WaitSettledAsync for one call of a run: until the run is settled, or
  // with `decided` until the call is (CallDecided). `done` gets the run's
  // id, kind and status with that one call in "calls" (what this process
  // knows of the run is judged and answered in that shape, without
  // building the whole run's view), or the whole view when the answer
  // comes from the store.
  CancelWait WaitCallAsync(const std::string& id, const std::string& call_id, bool decided,
                           std::chrono::milliseconds timeout,
                           Completion<StatusOr<nlohmann::json>> done);
  // Answers every pending WaitSettledAsync, and every later one, with `why`
  // (a draining server).
  void FinishWaits(const Status& why);
  // Drops every pending WaitSettledAsync (and every later one) without
  // calling it; when it returns no `done` runs or will run. For shutdown.
  void CancelWaits();
  StatusOr<std::vector<Event>> GetEvents(const std::string& id);
  StatusOr<InstancePage> List(const InstanceFilter& filter, size_t limit,
                              const std::string& cursor);
  // Steps awaiting approval, across active instances.
  // {"unfinished": {status: count}, "total_unfinished": n}.
  StatusOr<nlohmann::json> Counts();
  StatusOr<nlohmann::json> Approvals();
  // Prometheus text: call outcomes, reconciliations, events (escalations,
  // compensations...), replays detected, recovery and step latency.
  // Whether the store could commit a write now (see Store::CheckWritable).
  Status CheckWritable();
  // How long the store's writes have been queued with none finished
  // (Store::WritesStalled: the watchdog's measure).
  std::chrono::milliseconds WritesStalled() const;
  // Runs `fn` on the engine's housekeeping threads (which may wait for the
  // store; never an owner's) soon, then again every_ms after each run,
  // until it returns false or the engine stops. `fn` holds what it uses:
  // it may run after whoever asked is gone (the readiness probe).
  void Every(int64_t every_ms, std::function<bool()> fn);
  // Runs `fn` once, soon, on the housekeeping threads (never inside this
  // call): the API server's handlers run there.
  void PostHouse(std::function<void()> fn);
  std::string MetricsText();
  // Recovery bundle for a human (any status; meant for NEEDS_REVIEW).
  StatusOr<nlohmann::json> Bundle(const std::string& id);
  // The instance's receipt (coordinator/engine/instances/receipt.h).
  StatusOr<nlohmann::json> Receipt(const std::string& id);

  // Deploys a saga definition (JSON; a toolbox's when it says "kind":
  // "toolbox") as `name` version `version`, durably
  // and for every coordinator of the store (others load it within a
  // heartbeat); versions are immutable. True: deployed now; false: the same
  // definition was deployed already. InvalidArgument with the reason (a bad
  // definition, a name or version other than the one asked for, a service
  // not configured here); AlreadyExists if another definition holds that
  // version, here or in the store. `done` gets the outcome once the
  // definition is durable (or at once when refused before).
  void DeployAsync(const std::string& name, int version, const nlohmann::json& body,
                   const std::string& actor, Completion<StatusOr<bool>> done);

  // Downstream services: each one's limits (max_in_flight, max_per_second),
  // paused flag, calls in flight and steps queued for a permit, by name.
  nlohmann::json Services();
  // An operator pauses (new sends held; calls in flight finish,
  // reconciliation goes on) or resumes a service, durably and for every
  // coordinator of the store (others see it within a heartbeat).
  // A pause keeps who, why and since when (shown in the services' views as
  // "pause": {"by", "reason", "since"}) until the resume.
  // NotFound if no such service is configured; else the service's view,
  // given to `done` once durable.
  void PauseServiceAsync(const std::string& service, bool paused, const std::string& actor,
                         const std::string& reason, Completion<StatusOr<nlohmann::json>> done);

  // Operator actions. NotFound (instance/step), FailedPrecondition (not
  // allowed in the current state; message says why). Repeating an action that
  // already took effect is OK and changes nothing. With `done`, the action
  // does not wait for its commit: a refusal found first is returned at once
  // (`done` is not called), else Ok, and `done` gets the outcome on a worker.
  using ActionDone = Completion<Status>;
  Status Approve(const std::string& id, const std::string& step, const std::string& actor,
                 const std::string& comment, ActionDone done = nullptr);
  Status Reject(const std::string& id, const std::string& step, const std::string& actor,
                const std::string& reason, ActionDone done = nullptr);
  Status Cancel(const std::string& id, const std::string& actor, const std::string& reason,
                ActionDone done = nullptr);
  // Retries a step waiting on a retry timer, or whose retries ran out (saga in
  // review), now and with the same key; resets its backoff.
  Status RetryNow(const std::string& id, const std::string& step, const std::string& actor,
                  const std::string& comment, ActionDone done = nullptr);
  // Records `result` as the step's result without sending it (operator
  // decision); only for a step not yet sent, or under review.
  Status Skip(const std::string& id, const std::string& step, const nlohmann::json& result,
              const std::string& external_ref, const std::string& actor, const std::string& comment,
              ActionDone done = nullptr);
  // Starts the reverse path of an instance in NEEDS_REVIEW (no unknown
  // outcome may remain).
  Status ForceCompensate(const std::string& id, const std::string& actor, const std::string& reason,
                         ActionDone done = nullptr);
  // outcome: "committed" (with external_ref) or "not_executed".
  Status Resolve(const std::string& id, const std::string& step, const std::string& outcome,
                 const std::string& external_ref, const std::string& actor,
                 const std::string& comment, ActionDone done = nullptr);

  // ---- agent runs (docs/agents.md, sagas/toolbox.h) ----
  // Registers a toolbox (as Register does a saga; one name space for both).
  Status RegisterToolbox(const ToolboxDefinition& tb);
  std::vector<ToolboxDefinitionPtr> Toolboxes() const;
  // `version` 0: the newest; null if not registered.
  ToolboxDefinitionPtr Toolbox(const std::string& name, int version) const;
  // Opens a run of `toolbox` (OPEN, no calls), keeping `metadata` (agent,
  // model, prompt_version...); the key and hash as for SubmitAsync, and
  // `done` completed as it does.
  void StartRunAsync(const std::string& toolbox, int version, const nlohmann::json& input,
                     const nlohmann::json& metadata, const std::string& client_key,
                     const std::string& request_hash, const TraceContext& trace,
                     const std::string& by, Completion<StatusOr<SubmitOutcome>> done);
  // An agent's call (coordinator/engine/actions/agent_runs.h): true when recorded
  // now, false when the same call was made before (its first outcome
  // answers). InvalidArgument (nothing recorded), AlreadyExists (the
  // call_id was used for another call), FailedPrecondition (the run takes
  // no calls now), NotFound; given to `done` once its commit is done, or at
  // once when refused first.
  void AppendCallAsync(const std::string& id, const nlohmann::json& call, const std::string& actor,
                       Completion<StatusOr<bool>> done);
  // A run's decision (docs/agents.md): `done` gets the decision as
  // recorded and whether it was recorded before (then it is the first
  // value, whatever `decision` carries).
  void DecideAsync(const std::string& id, const nlohmann::json& decision, const std::string& actor,
                   Completion<StatusOr<std::pair<nlohmann::json, bool>>> done);
  // With `done`: asynchronous, as the operator actions above.
  Status FinishRun(const std::string& id, const std::string& actor, ActionDone done = nullptr);
  Status AbortRun(const std::string& id, const std::string& actor, const std::string& reason,
                  ActionDone done = nullptr);

  // How many runs `principal` has OPEN (or waiting: not finished), from
  // the store's unfinished instances: what max_open_runs bounds.
  StatusOr<size_t> OpenRuns(const std::string& principal);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sagad
