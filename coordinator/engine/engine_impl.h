// Engine::Impl: the wiring of the engine's parts, its lifecycle, reads and
// the rounds that are not one instance's (heartbeat, retention). It holds no
// lock or table of its own. Each part has a header stating its contract and
// unit tests of its own, and depends only on parts below it:
//
//   Engine (engine.h, the facade)
//     Engine::Impl, defined by concern in engine*.cc:
//       engine.cc            the facade, wiring, lifecycle (start, stop)
//       engine_reads.cc      reads (views, events, lists, approvals, bundle)
//       engine_state.cc      what follows each commit, outbox messages,
//                            ownership rounds (heartbeat), retention
//     wires:
//       Submissions          new instances, Idempotency-Key replays
//       OperatorActions      approve, reject, cancel, retry, skip, force
//                            compensation, resolve
//       Driver               which instance runs next: its saga-level
//                            transitions, step actions on workers, timers,
//                            deadlines, recovery round robin; owns
//         StepRunner         send, record, chain, reconcile, undo one step
//     over:
//       DefinitionRegistry   saga definitions by name and version
//       InstanceRepository   load, cache, compare-and-swap commit
//       Ownership            leases, fencing tokens, renewal
//       RunTable             drivers and step actions under way, wake-ups
//       RecoveryTracker      instances not yet resumed since start-up
//       EngineMetrics        counters, histograms, gauges
//       Waiters              `?wait=` callers, woken when an instance settles
//       policies/planner.h      what to do next (pure); saga_turns.h, Tx
// Private to the engine; include only in engine*.cc.
// Thread-safety: as Engine's (coordinator/engine/engine.h).
#pragma once

#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "coordinator/engine/actions/agent_runs.h"
#include "coordinator/engine/actions/operator_actions.h"
#include "coordinator/engine/actions/submissions.h"
#include "coordinator/engine/actions/waiters.h"
#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/driver/driver.h"
#include "coordinator/engine/driver/recovery_tracker.h"
#include "coordinator/engine/engine.h"
#include "coordinator/engine/instances/definition_registry.h"
#include "coordinator/engine/instances/instance_repository.h"
#include "coordinator/engine/instances/ownership.h"
#include "coordinator/engine/instances/run_table.h"
#include "coordinator/engine/instances/transition.h"
#include "coordinator/engine/metrics/engine_metrics.h"
#include "coordinator/engine/owners/executor.h"
#include "coordinator/engine/services/service_gates.h"
#include "policies/planner.h"
#include "sagas/instance.h"
#include "util/json_limits.h"
#include "util/log.h"
#include "util/random.h"

namespace sagad {

class Engine::Impl final : private InstanceRepository::Listener, private Submissions::Starter {
 public:
  Impl(Store& store, Adapter& adapter, Clock& clock, EngineOptions options);

  ~Impl();

  // ---- definitions ----
  // Registers a saga (a toolbox) and declares its search attributes to the
  // store (Store::DeclareSearchAttributesAsync: the index is built behind;
  // lists scan meanwhile). Every registration goes through these two.
  Status Register(const SagaDefinition& def);
  Status RegisterToolbox(const ToolboxDefinition& tb);

  std::vector<SagaDefinitionPtr> Definitions() const { return defs_.All(); }

  SagaDefinitionPtr Definition(const std::string& name, int version) const {
    return defs_.Get(name, version);
  }

  // ---- lifecycle ----
  Status Start();
  // What Start needs from the store: the unfinished instances, the paused
  // services, the deployed definitions.
  StatusOr<std::vector<ActiveInstance>> ReadForStart();
  static constexpr int kStartTries = 150;  // 200 ms apart

  void Stop();
  // Engine::Every; `now`: the first run is soon, else after every_ms (the
  // heartbeat and the retention sweep run this way too).
  void Every(int64_t every_ms, std::function<bool()> fn, bool now);

  // ---- submissions ----
  Submissions& submissions() { return submissions_; }

  // ---- reads ----
  StatusOr<nlohmann::json> GetInstance(const std::string& id);
  StatusOr<Engine::Head> GetHead(const std::string& id);
  CancelWait WaitCallAsync(const std::string& id, const std::string& call_id, bool decided,
                           std::chrono::milliseconds timeout, Waiters::Done done);

  CancelWait WaitSettledAsync(const std::string& id, std::chrono::milliseconds timeout,
                              Waiters::Done done, Waiters::Until until);
  void FinishWaits(const Status& why);

  void CancelWaits();

  StatusOr<std::vector<Event>> GetEvents(const std::string& id);

  StatusOr<InstancePage> List(const InstanceFilter& filter, size_t limit,
                              const std::string& cursor);

  // Every step awaiting approval, oldest first, with the exact request an
  // approval lets go (the approval binds to its key and args hash).
  StatusOr<nlohmann::json> Approvals();
  StatusOr<size_t> OpenRuns(const std::string& principal);

  // Unfinished instances by status (from the index: no snapshot is read).
  StatusOr<nlohmann::json> Counts();

  StatusOr<nlohmann::json> Bundle(const std::string& id);

  // ---- definitions deployed over the API (engine_definitions.cc) ----
  void DeployAsync(const std::string& name, int version, const nlohmann::json& body,
                   const std::string& actor, Completion<StatusOr<bool>> done);
  // A definition checked and ready to store (a saga's or a toolbox's).
  struct Deployment {
    std::string name;
    int version = 0;
    std::string actor;
    nlohmann::json canonical;  // what the store keeps
    std::shared_ptr<const SagaDefinition> saga;
    std::shared_ptr<const ToolboxDefinition> toolbox;
  };
  StatusOr<Deployment> PrepareDeploy(const std::string& name, int version,
                                     const nlohmann::json& body, const std::string& actor);
  Status PrepareToolbox(const nlohmann::json& j, Deployment* d);
  // Registers a deployment once stored; what Deploy answers.
  StatusOr<bool> Deployed(const Deployment& d, const StatusOr<bool>& stored);
  // Registers what the store holds that is not registered yet (start-up,
  // heartbeat). At start-up a deployed version that differs from one given
  // here (a file, C++) is an error; later it is logged and skipped.
  Status LoadDeployed(bool starting);
  Status LoadToolbox(const StoredDefinition& d);
  Status ToolboxServicesConfigured(const ToolboxDefinition& tb) const;
  // InvalidArgument naming a service `def` calls that is not configured.
  Status ServicesConfigured(const SagaDefinition& def) const;
  bool Configured(const CallSpec& call) const;

  // ---- downstream services (engine_services.cc) ----
  nlohmann::json Services();
  nlohmann::json PauseNotes();
  void PauseServiceAsync(const std::string& service, bool paused, const std::string& actor,
                         const std::string& reason, Completion<StatusOr<nlohmann::json>> done);
  // After a pause or resume is stored: the gates, the log, the view.
  StatusOr<nlohmann::json> Paused(const std::string& service, bool paused, const std::string& actor,
                                  const std::string& reason, const Status& stored);
  // Reads the paused set from the store (start-up, heartbeat).
  Status RefreshPaused();
  // Names, in the view of each step waiting for a permit, the service.
  void AnnotateWaits(nlohmann::json* view);
  void AnnotateActions(nlohmann::json* view);

  // ---- operator actions ----
  OperatorActions& operators() { return operators_; }
  AgentRuns& agent_runs() { return agent_runs_; }
  DefinitionRegistry& defs() { return defs_; }
  Executor& executor() { return executor_; }

 private:
  // Plans the instance (Driver::Schedule).
  void Schedule(const std::string& id) { driver_.Schedule(id); }
  // How a new instance starts: the driver's FirstStep and StartCreated.
  Status FirstStep(Tx& tx, const SagaDefinition& def, StepMark* step,
                   StepRequest* request) override {
    return driver_.FirstStep(tx, def, step, request);
  }
  void StartCreated(const std::string& id, const SagaDefinitionPtr& def, StepMark step,
                    StepRequest* request, const TraceContext& trace, bool created) override {
    driver_.StartCreated(id, def, std::move(step), request, trace, created);
  }

  // ---- outbox ----
  // What others may care about, as outbox messages (empty without webhooks).
  std::vector<nlohmann::json> OutboxMessages(const Instance& inst,
                                             const std::vector<Event>& events) override;

  // ---- metrics ----
 public:
  std::string MetricsText();

 private:
  // ---- ownership ----
  // Every lease_ms/3 (at least 50 ms; Every): renew what this process owns, forget what it lost,
  // pick up instances whose owner stopped heartbeating, and notice changes
  // another process committed (an approval that came in over its API).
  void Heartbeat();

  // ---- retention ----
  // Deletes what finished more than retention_ms ago, 100 instances per
  // write transaction and at most 50 transactions per round, once a second
  // (or sooner for a short retention; Every): short transactions, since on
  // LMDB the writer lock is shared by every process.
  void Sweep();

  // ---- state ----
  // For reads (views, approvals): the repository's Peek, which never fills its cache.
  StatusOr<std::shared_ptr<const Instance>> Load(const std::string& id);

  // After each commit (under the instance's lock): a finished instance's
  // lease is gone, webhooks and waiters hear of it, metrics count it.
  void Committed(const InstanceRepository::Commit& c) override;
  void CommitAttempted(std::chrono::steady_clock::duration took) override {
    metrics_.CommitAttempt(took);
  }
  void Log(LogLevel level, nlohmann::json line) override { EngineLog(level, std::move(line)); }

  Store& store_;

 public:
  Store& store();

 private:
  Adapter& adapter_;
  Clock& clock_;
  EngineOptions options_;
  Random& random_;
  // The default executor (none when options_.executor is given).
  std::unique_ptr<Executor> own_executor_;
  Executor& executor_;

  DefinitionRegistry defs_;

  EngineMetrics metrics_;
  Ownership ownership_;
  InstanceRepository repo_;
  RunTable runs_;
  RecoveryTracker recovery_;
  ServiceGates gates_{adapter_, clock_};
  OperatorActions operators_;
  AgentRuns agent_runs_{defs_,
                        operators_,
                        store_,
                        executor_,
                        [this](const std::string& toolbox, const std::string& guard,
                               const char* verdict) { metrics_.Guarded(toolbox, guard, verdict); },
                        *this};
  Submissions submissions_;

  Driver driver_;
  Waiters waiters_{store_, executor_, clock_};
};

}  // namespace sagad
