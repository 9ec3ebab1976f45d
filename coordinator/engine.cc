#include "coordinator/engine_impl.h"

namespace sagad {

// One structured JSON line per significant event on stderr. Never tokens or
// request bodies.
void EngineLog(nlohmann::json line) {
  static std::mutex mu;
  auto now = std::chrono::system_clock::now();
  time_t t = std::chrono::system_clock::to_time_t(now);
  int ms =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                           now.time_since_epoch())
                           .count() %
                       1000);
  std::tm tm;
  gmtime_r(&t, &tm);
  char ts[64];
  snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
           tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
           tm.tm_sec, ms);
  line["ts"] = ts;
  line["level"] = "info";
  std::lock_guard<std::mutex> l(mu);
  std::cerr << DumpJson(line) << "\n";
}

std::string NewInstanceId(int64_t now_ms) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  uint64_t r;
  {
    std::lock_guard<std::mutex> l(mu);
    r = rng();
  }
  char buf[40];
  snprintf(buf, sizeof buf, "%012llx-%016llx",
           static_cast<unsigned long long>(now_ms),
           static_cast<unsigned long long>(r));
  return buf;
}

bool Engine::IsSettled(const std::string& status) {
  return status == "COMPLETED" || status == "COMPENSATED" ||
         status == "AWAITING_APPROVAL" || status == "NEEDS_REVIEW";
}

Engine::Impl::Impl(Store& store, Adapter& adapter, Clock& clock,
                   EngineOptions options)
    : store_(store),
      adapter_(adapter),
      clock_(clock),
      options_(options),
      pool_(static_cast<size_t>(std::max(1, options.workers))),
      work_(boost::asio::make_work_guard(io_)),
      timer_thread_([this] { io_.run(); }),
      rng_(std::random_device{}()) {
  char incarnation[20];
  snprintf(incarnation, sizeof incarnation, "%016llx",
           static_cast<unsigned long long>(std::random_device{}()) << 32 |
               static_cast<unsigned long long>(std::random_device{}()));
  owner_ = options_.coordinator_id + "/" + incarnation;
  metrics_.Describe("sagad_step_calls_total", "counter",
                    "Downstream calls by phase (forward/compensation) and "
                    "classified outcome.");
  metrics_.Describe("sagad_reconciliations_total", "counter",
                    "Questions about unclear outcomes, by phase and answer.");
  metrics_.Describe(
      "sagad_events_total", "counter",
      "Committed instance events by type (escalations: saga_needs_review).");
  metrics_.Describe("sagad_duplicate_effects_detected_total", "counter",
                    "Calls a downstream answered as an idempotent replay.");
  metrics_.Describe(
      "sagad_recovery_latency_seconds", "histogram",
      "From sagad start to the first transition of each recovered instance.");
  metrics_.Describe("sagad_step_latency_seconds", "histogram",
                    "Downstream call latency.");
  metrics_.Describe("sagad_escalations_total", "counter",
                    "Instances sent to NEEDS_REVIEW.");
  metrics_.Describe("sagad_store_commit_seconds", "histogram",
                    "LMDB write transactions of a transition (writer lock "
                    "held, fsync included).");
  metrics_.Describe("sagad_retries_total", "counter",
                    "Re-sends of a forward step (same key).");
  metrics_.Describe(
      "sagad_retry_budget_exhausted_total", "counter",
      "Retries deferred because the service's retry budget was empty.");
  metrics_.Describe(
      "sagad_retention_deleted_total", "counter",
      "Finished instances deleted by retention (with their events, operation "
      "records and submission keys).");
  ExportKnownCountersAtZero();
}

auto Engine::Impl::ExportKnownCountersAtZero() -> void {
  for (const char* phase : {"forward", "compensation"}) {
    for (Outcome o : {Outcome::kCommitted, Outcome::kFailed,
                      Outcome::kNotExecuted, Outcome::kUnknown})
      metrics_.Inc("sagad_step_calls_total",
                   std::string("phase=\"") + phase + "\",outcome=\"" +
                       OutcomeName(o) + "\"",
                   0);
    for (const char* answer : {"happened", "not_happened", "unknown"})
      metrics_.Inc(
          "sagad_reconciliations_total",
          std::string("phase=\"") + phase + "\",answer=\"" + answer + "\"", 0);
  }
  std::vector<std::string> types = {"instance_created", "reconciled",
                                    "retry_deferred", "retry_requested"};
  for (int k = 0; k <= static_cast<int>(StepEvent::kSkip); ++k)
    types.push_back(StepEventName(static_cast<StepEvent>(k)));
  for (int k = 0; k <= static_cast<int>(SagaEvent::kEscalate); ++k)
    types.push_back(SagaEventName(static_cast<SagaEvent>(k)));
  for (const auto& t : types)
    metrics_.Inc("sagad_events_total", "type=\"" + t + "\"", 0);
  for (const char* name :
       {"sagad_duplicate_effects_detected_total", "sagad_escalations_total",
        "sagad_retries_total", "sagad_retention_deleted_total"})
    metrics_.Inc(name, "", 0);
}

Engine::Impl::~Impl() { Stop(); }

auto Engine::Impl::Register(const SagaDefinition& def) -> Status {
  SAGAD_RETURN_IF_ERROR(Validate(def));
  std::lock_guard<std::mutex> l(defs_mu_);
  auto& versions = defs_[def.name];
  auto it = versions.find(def.version);
  if (it != versions.end()) {
    if (*it->second == def) return Status::Ok();
    return AlreadyExists("saga " + def.name + " version " +
                         std::to_string(def.version) +
                         " is already registered with a different definition");
  }
  versions[def.version] = std::make_shared<const SagaDefinition>(def);
  return Status::Ok();
}

auto Engine::Impl::Definitions() const -> std::vector<SagaDefinitionPtr> {
  std::lock_guard<std::mutex> l(defs_mu_);
  std::vector<SagaDefinitionPtr> out;
  for (const auto& [name, versions] : defs_)
    for (const auto& [v, d] : versions) out.push_back(d);
  return out;
}

auto Engine::Impl::Definition(const std::string& name, int version) const
    -> SagaDefinitionPtr {
  std::lock_guard<std::mutex> l(defs_mu_);
  auto it = defs_.find(name);
  if (it == defs_.end() || it->second.empty()) return nullptr;
  if (version <= 0) return it->second.rbegin()->second;
  auto v = it->second.find(version);
  return v == it->second.end() ? nullptr : v->second;
}

auto Engine::Impl::Start() -> Status {
  auto start = clock_.SteadyNow();
  auto active = store_.ListActive();
  if (!active.ok()) return active.status();
  std::vector<std::string> ids;
  for (const auto& a : *active) ids.push_back(a.id);
  {
    std::lock_guard<std::mutex> l(recovery_mu_);
    recovery_start_ = start;
    recovering_.insert(ids.begin(), ids.end());
  }
  // One transaction takes every lease that is free or was this process's
  // predecessor's; the drivers then start without a write each.
  auto taken =
      store_.AcquireLeases(ids, owner_, clock_.NowMillis(), options_.lease_ms,
                           options_.coordinator_id + "/");
  if (taken.ok())
    for (const auto& [id, lease] : *taken) Own(id, lease);
  for (const auto& id : ids) Schedule(id);
  ScheduleHeartbeat();
  if (options_.retention_ms > 0) ScheduleSweep();
  EngineLog({{"msg", "recovery scheduled"},
             {"instances", ids.size()},
             {"ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                        clock_.SteadyNow() - start)
                        .count()}});
  return Status::Ok();
}

auto Engine::Impl::Stop() -> void {
  {
    std::unique_lock<std::mutex> l(sched_mu_);
    if (stopped_) return;
    stopping_ = true;
    idle_cv_.wait(l, [this] { return running_.empty() && step_tasks_ == 0; });
    stopped_ = true;
  }
  work_.reset();
  io_.stop();
  if (timer_thread_.joinable()) timer_thread_.join();
  pool_.join();
}

Engine::Engine(Store& store, Adapter& adapter, Clock& clock,
               EngineOptions options)
    : impl_(new Impl(store, adapter, clock, options)) {}
Engine::~Engine() = default;
Status Engine::Register(const SagaDefinition& def) {
  return impl_->Register(def);
}
std::vector<SagaDefinitionPtr> Engine::Definitions() const {
  return impl_->Definitions();
}
Status Engine::Start() { return impl_->Start(); }
void Engine::Stop() { impl_->Stop(); }
StatusOr<SubmitOutcome> Engine::Submit(const std::string& saga, int version,
                                       const nlohmann::json& input,
                                       const std::string& client_key,
                                       const std::string& request_hash,
                                       const TraceContext& trace) {
  return impl_->Submit(saga, version, input, client_key, request_hash, trace);
}
void Engine::FinishSubmission(const std::string& key, int status,
                              const nlohmann::json& r) {
  impl_->FinishSubmission(key, status, r);
}
StatusOr<nlohmann::json> Engine::GetInstance(const std::string& id) {
  return impl_->GetInstance(id);
}
StatusOr<nlohmann::json> Engine::WaitSettled(const std::string& id,
                                             std::chrono::milliseconds t) {
  return impl_->WaitSettled(id, t);
}
void Engine::WaitSettledAsync(
    const std::string& id, std::chrono::milliseconds timeout,
    std::function<void(StatusOr<nlohmann::json>)> done) {
  impl_->WaitSettledAsync(id, timeout, std::move(done));
}
void Engine::CancelWaits() { impl_->CancelWaits(); }
StatusOr<std::vector<Event>> Engine::GetEvents(const std::string& id) {
  return impl_->GetEvents(id);
}
StatusOr<InstancePage> Engine::List(const InstanceFilter& filter, size_t limit,
                                    const std::string& cursor) {
  return impl_->List(filter, limit, cursor);
}
StatusOr<nlohmann::json> Engine::Approvals() { return impl_->Approvals(); }
StatusOr<nlohmann::json> Engine::Counts() { return impl_->Counts(); }
std::string Engine::MetricsText() { return impl_->MetricsText(); }
Status Engine::CheckWritable() { return impl_->store().CheckWritable(); }
StatusOr<nlohmann::json> Engine::Bundle(const std::string& id) {
  return impl_->Bundle(id);
}
Status Engine::Approve(const std::string& id, const std::string& step,
                       const std::string& actor, const std::string& comment) {
  return impl_->Approve(id, step, actor, comment);
}
Status Engine::Reject(const std::string& id, const std::string& step,
                      const std::string& actor, const std::string& reason) {
  return impl_->Reject(id, step, actor, reason);
}
Status Engine::Cancel(const std::string& id, const std::string& actor,
                      const std::string& reason) {
  return impl_->Cancel(id, actor, reason);
}
Status Engine::RetryNow(const std::string& id, const std::string& step,
                        const std::string& actor, const std::string& comment) {
  return impl_->RetryNow(id, step, actor, comment);
}
Status Engine::Skip(const std::string& id, const std::string& step,
                    const nlohmann::json& result,
                    const std::string& external_ref, const std::string& actor,
                    const std::string& comment) {
  return impl_->Skip(id, step, result, external_ref, actor, comment);
}
Status Engine::ForceCompensate(const std::string& id, const std::string& actor,
                               const std::string& reason) {
  return impl_->ForceCompensate(id, actor, reason);
}
Status Engine::Resolve(const std::string& id, const std::string& step,
                       const std::string& outcome,
                       const std::string& external_ref,
                       const std::string& actor, const std::string& comment) {
  return impl_->Resolve(id, step, outcome, external_ref, actor, comment);
}

}  // namespace sagad
