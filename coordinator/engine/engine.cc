#include <algorithm>

#include "coordinator/engine/engine_impl.h"
#include "coordinator/engine/instances/receipt.h"
#include "coordinator/engine/owners/asio_executor.h"

namespace sagad {

Engine::Impl::Impl(Store& store, Adapter& adapter, Clock& clock, EngineOptions options)
    : store_(store),
      adapter_(adapter),
      clock_(clock),
      options_(options),
      random_(options.random ? *options.random : SystemRandom::Shared()),
      own_executor_(options.executor ? nullptr
                                     : new AsioExecutor(options.workers, options.house_threads)),
      executor_(options.executor ? *options.executor : *own_executor_),
      ownership_(store, clock, options.coordinator_id, options.lease_ms, random_),
      repo_(store, clock, this, &executor_),
      operators_(defs_, repo_, runs_, [this](const std::string& id) { Schedule(id); }),
      submissions_(defs_, repo_, ownership_, clock_, *this, random_),
      driver_(adapter, defs_, repo_, ownership_, runs_, recovery_, metrics_, gates_, clock_,
              random_, executor_, options.workers, store_.ReadsMayWait()) {
  gates_.SetWake([this](const std::string& id) { Schedule(id); });
}

Engine::Impl::~Impl() { Stop(); }

auto Engine::Impl::ReadForStart() -> StatusOr<std::vector<ActiveInstance>> {
  auto active = store_.ListActive();
  if (!active.ok()) return active.status();
  // Paused services and deployed definitions are known before anything runs.
  SAGAD_RETURN_IF_ERROR(RefreshPaused());
  SAGAD_RETURN_IF_ERROR(LoadDeployed(true));
  return active;
}

auto Engine::Impl::Start() -> Status {
  auto start = clock_.SteadyNow();
  // A database restarting as this process starts (they often start
  // together) is waited for, up to 30 s, as OpenStore waits to connect.
  auto active = ReadForStart();
  for (int tries = 1;
       !active.ok() && active.status().code() == StatusCode::kUnavailable && tries < kStartTries;
       ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    active = ReadForStart();
  }
  if (!active.ok()) return active.status();
  std::vector<std::string> ids;
  for (const auto& a : *active) ids.push_back(a.id);
  recovery_.Begin(ids, start);
  // One transaction takes every lease that is free or was this process's
  // predecessor's; the drivers then start without a write each.
  ownership_.AcquireAll(ids);
  for (const auto& id : ids) Schedule(id);
  // Both until the engine stops.
  Every(
      std::max<int64_t>(50, options_.lease_ms / 3),
      [this] {
        Heartbeat();
        return true;
      },
      /*now=*/false);
  if (options_.retention_ms > 0)
    Every(
        std::clamp<int64_t>(options_.retention_ms / 4, 50, 1000),
        [this] {
          Sweep();
          return true;
        },
        /*now=*/false);
  EngineLog(
      {{"msg", "recovery scheduled"},
       {"instances", ids.size()},
       {"ms", std::chrono::duration_cast<std::chrono::milliseconds>(clock_.SteadyNow() - start)
                  .count()}});
  return Status::Ok();
}

auto Engine::Impl::Stop() -> void {
  if (!runs_.StopAndWait()) return;
  repo_.WaitIdle();  // no store thread still hands a continuation to the executor
  submissions().WaitIdle();
  executor_.Shutdown();
}

Engine::Engine(Store& store, Adapter& adapter, Clock& clock, EngineOptions options)
    : impl_(new Impl(store, adapter, clock, options)) {}
Engine::~Engine() = default;
Status Engine::Register(const SagaDefinition& def) { return impl_->Register(def); }
std::vector<SagaDefinitionPtr> Engine::Definitions() const { return impl_->Definitions(); }
SagaDefinitionPtr Engine::Definition(const std::string& name, int version) const {
  return impl_->Definition(name, version);
}
Status Engine::Start() { return impl_->Start(); }
void Engine::Stop() { impl_->Stop(); }
void Engine::SubmitAsync(const std::string& saga, int version, const nlohmann::json& input,
                         const std::string& client_key, const std::string& request_hash,
                         const TraceContext& trace, const std::string& by,
                         Completion<StatusOr<SubmitOutcome>> done) {
  impl_->submissions().SubmitAsync(saga, version, input, client_key, request_hash, trace, nullptr,
                                   by, std::move(done));
}
void Engine::FinishSubmission(const std::string& key, int status, const nlohmann::json& r,
                              Task then) {
  impl_->submissions().Finish(key, status, r, std::move(then));
}
StatusOr<nlohmann::json> Engine::GetInstance(const std::string& id) {
  return impl_->GetInstance(id);
}
StatusOr<Engine::Head> Engine::GetHead(const std::string& id) { return impl_->GetHead(id); }
CancelWait Engine::WaitSettledAsync(const std::string& id, std::chrono::milliseconds timeout,
                                    Completion<StatusOr<nlohmann::json>> done, WaitUntil until) {
  return impl_->WaitSettledAsync(id, timeout, std::move(done), std::move(until));
}
CancelWait Engine::WaitCallAsync(const std::string& id, const std::string& call_id, bool decided,
                                 std::chrono::milliseconds timeout,
                                 Completion<StatusOr<nlohmann::json>> done) {
  return impl_->WaitCallAsync(id, call_id, decided, timeout, std::move(done));
}
Engine::WaitUntil Engine::Decided() { return Waiters::Decided; }
Engine::WaitUntil Engine::CallDecided(const std::string& call_id) {
  return Waiters::CallDecided(call_id);
}
void Engine::FinishWaits(const Status& why) { impl_->FinishWaits(why); }
void Engine::CancelWaits() { impl_->CancelWaits(); }
StatusOr<std::vector<Event>> Engine::GetEvents(const std::string& id) {
  return impl_->GetEvents(id);
}
StatusOr<InstancePage> Engine::List(const InstanceFilter& filter, size_t limit,
                                    const std::string& cursor) {
  return impl_->List(filter, limit, cursor);
}
StatusOr<nlohmann::json> Engine::Approvals() { return impl_->Approvals(); }
StatusOr<size_t> Engine::OpenRuns(const std::string& principal) {
  return impl_->OpenRuns(principal);
}
StatusOr<nlohmann::json> Engine::Counts() { return impl_->Counts(); }
std::string Engine::MetricsText() { return impl_->MetricsText(); }
Status Engine::CheckWritable() { return impl_->store().CheckWritable(); }
std::chrono::milliseconds Engine::WritesStalled() const { return impl_->store().WritesStalled(); }
void Engine::Every(int64_t every_ms, std::function<bool()> fn) {
  impl_->Every(every_ms, std::move(fn), /*now=*/true);
}
void Engine::PostHouse(std::function<void()> fn) { impl_->executor().Post(std::move(fn)); }
StatusOr<nlohmann::json> Engine::Bundle(const std::string& id) { return impl_->Bundle(id); }
StatusOr<nlohmann::json> Engine::Receipt(const std::string& id) {
  auto events = impl_->GetEvents(id);
  if (!events.ok()) return events.status();
  return BuildReceipt(*events);
}
nlohmann::json Engine::Services() { return impl_->Services(); }
void Engine::DeployAsync(const std::string& name, int version, const nlohmann::json& body,
                         const std::string& actor, Completion<StatusOr<bool>> done) {
  impl_->DeployAsync(name, version, body, actor, std::move(done));
}
void Engine::PauseServiceAsync(const std::string& service, bool paused, const std::string& actor,
                               const std::string& reason,
                               Completion<StatusOr<nlohmann::json>> done) {
  impl_->PauseServiceAsync(service, paused, actor, reason, std::move(done));
}
Status Engine::RegisterToolbox(const ToolboxDefinition& tb) { return impl_->RegisterToolbox(tb); }
std::vector<ToolboxDefinitionPtr> Engine::Toolboxes() const { return impl_->defs().AllToolboxes(); }
ToolboxDefinitionPtr Engine::Toolbox(const std::string& name, int version) const {
  return impl_->defs().GetToolbox(name, version);
}
void Engine::StartRunAsync(const std::string& toolbox, int version, const nlohmann::json& input,
                           const nlohmann::json& metadata, const std::string& client_key,
                           const std::string& request_hash, const TraceContext& trace,
                           const std::string& by, Completion<StatusOr<SubmitOutcome>> done) {
  if (!metadata.is_object()) return done(InvalidArgument("metadata must be a JSON object"));
  impl_->submissions().SubmitAsync(toolbox, version, input, client_key, request_hash, trace,
                                   &metadata, by, std::move(done));
}
void Engine::AppendCallAsync(const std::string& id, const nlohmann::json& call,
                             const std::string& actor, Completion<StatusOr<bool>> done) {
  impl_->agent_runs().AppendAsync(id, call, actor, std::move(done));
}
void Engine::DecideAsync(const std::string& id, const nlohmann::json& decision,
                         const std::string& actor,
                         Completion<StatusOr<std::pair<nlohmann::json, bool>>> done) {
  impl_->agent_runs().DecideAsync(id, decision, actor, [done](StatusOr<AgentRuns::Decided> d) {
    if (!d.ok()) return done(d.status());
    done(std::make_pair(d->decision, d->replayed));
  });
}
Status Engine::FinishRun(const std::string& id, const std::string& actor, ActionDone done) {
  return impl_->agent_runs().Finish(id, actor, std::move(done));
}
Status Engine::AbortRun(const std::string& id, const std::string& actor, const std::string& reason,
                        ActionDone done) {
  return impl_->agent_runs().Abort(id, actor, reason, std::move(done));
}

Status Engine::Approve(const std::string& id, const std::string& step, const std::string& actor,
                       const std::string& comment, ActionDone done) {
  return impl_->operators().Approve(id, step, actor, comment, std::move(done));
}
Status Engine::Reject(const std::string& id, const std::string& step, const std::string& actor,
                      const std::string& reason, ActionDone done) {
  return impl_->operators().Reject(id, step, actor, reason, std::move(done));
}
Status Engine::Cancel(const std::string& id, const std::string& actor, const std::string& reason,
                      ActionDone done) {
  return impl_->operators().Cancel(id, actor, reason, std::move(done));
}
Status Engine::RetryNow(const std::string& id, const std::string& step, const std::string& actor,
                        const std::string& comment, ActionDone done) {
  return impl_->operators().RetryNow(id, step, actor, comment, std::move(done));
}
Status Engine::Skip(const std::string& id, const std::string& step, const nlohmann::json& result,
                    const std::string& external_ref, const std::string& actor,
                    const std::string& comment, ActionDone done) {
  return impl_->operators().Skip(id, step, result, external_ref, actor, comment, std::move(done));
}
Status Engine::ForceCompensate(const std::string& id, const std::string& actor,
                               const std::string& reason, ActionDone done) {
  return impl_->operators().ForceCompensate(id, actor, reason, std::move(done));
}
Status Engine::Resolve(const std::string& id, const std::string& step, const std::string& outcome,
                       const std::string& external_ref, const std::string& actor,
                       const std::string& comment, ActionDone done) {
  return impl_->operators().Resolve(id, step, outcome, external_ref, actor, comment,
                                    std::move(done));
}

}  // namespace sagad
