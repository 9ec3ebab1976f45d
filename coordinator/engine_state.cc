// Engine: state and bookkeeping. Outbox messages, metrics, ownership
// (leases, heartbeat, takeover), retention, the instance cache and Mutate.
#include "coordinator/engine_impl.h"

namespace sagad {

auto Engine::Impl::OutboxMessages(const Instance& inst,
                                  const std::vector<Event>& events)
    -> std::vector<nlohmann::json> {
  std::vector<nlohmann::json> out;
  if (!options_.outbox) return out;
  static const std::set<std::string> kQuiet = {"started",
                                               "reconciled",
                                               "retry_deferred",
                                               "compensation_started",
                                               "compensation_unknown",
                                               "not_executed"};
  for (const Event& e : events) {
    if (kQuiet.count(e.type)) continue;
    nlohmann::json m = {{"id", inst.id() + ":" + std::to_string(e.seq)},
                        {"type", e.type},
                        {"instance_id", inst.id()},
                        {"saga", inst.saga()},
                        {"saga_version", inst.saga_version()},
                        {"seq", e.seq},
                        {"at", e.at_ms},
                        {"status", SagaStatusName(inst.status())}};
    if (!e.step.empty()) m["step"] = e.step;
    if (inst.trace().is_object())
      m["trace_id"] = inst.trace().value("trace_id", "");
    for (const char* f : {"external_ref", "reason", "by", "error", "comment"})
      if (e.data.contains(f)) m[f] = e.data[f];
    out.push_back(std::move(m));
  }
  return out;
}

auto Engine::Impl::RecordCall(const char* phase, const CallResult& res,
                              std::chrono::steady_clock::duration d) -> void {
  metrics_.Inc("sagad_step_calls_total", std::string("phase=\"") + phase +
                                             "\",outcome=\"" +
                                             OutcomeName(res.outcome) + "\"");
  if (res.replayed) metrics_.Inc("sagad_duplicate_effects_detected_total");
  metrics_.Observe("sagad_step_latency_seconds",
                   std::chrono::duration<double>(d).count());
}

auto Engine::Impl::RecordCommit(std::chrono::steady_clock::duration d) -> void {
  double secs = std::chrono::duration<double>(d).count();
  metrics_.Observe("sagad_store_commit_seconds", secs);
  std::lock_guard<std::mutex> l(commit_max_mu_);
  max_commit_seconds_ = std::max(max_commit_seconds_, secs);
}

auto Engine::Impl::RecordQuery(const char* phase, const QueryResult& q)
    -> void {
  const char* answer = q.outcome == QueryOutcome::kHappened ? "happened"
                       : q.outcome == QueryOutcome::kNotHappened
                           ? "not_happened"
                           : "unknown";
  metrics_.Inc(
      "sagad_reconciliations_total",
      std::string("phase=\"") + phase + "\",answer=\"" + answer + "\"");
}

auto Engine::Impl::MetricsText() -> std::string {
  std::string extra;
  auto active = store_.ListActive();
  if (active.ok()) {
    std::map<std::string, int>
        by;  // saga + status of every unfinished instance
    for (const auto& a : *active)
      ++by["saga=\"" + a.saga + "\",status=\"" + a.status + "\""];
    extra +=
        "# HELP sagad_instances_active Instances not yet COMPLETED or "
        "COMPENSATED.\n"
        "# TYPE sagad_instances_active gauge\nsagad_instances_active " +
        std::to_string(active->size()) + "\n";
    extra +=
        "# HELP sagad_instances Unfinished instances by saga and status.\n"
        "# TYPE sagad_instances gauge\n";
    for (const auto& [labels, n] : by)
      extra += "sagad_instances{" + labels + "} " + std::to_string(n) + "\n";
  }
  extra +=
      "# HELP sagad_store_synced_commits_total Durable write transactions "
      "committed (LMDB: "
      "an fdatasync of the data file and a synchronous meta-page write each; "
      "PostgreSQL: "
      "one transaction and WAL flush each; group commit makes them fewer than "
      "transitions).\n"
      "# TYPE sagad_store_synced_commits_total "
      "counter\nsagad_store_synced_commits_total " +
      std::to_string(store_.SyncedCommits()) + "\n";
  {
    std::lock_guard<std::mutex> l(commit_max_mu_);
    extra +=
        "# HELP sagad_store_commit_max_seconds Longest write transaction "
        "(writer lock held, fsync included).\n"
        "# TYPE sagad_store_commit_max_seconds "
        "gauge\nsagad_store_commit_max_seconds " +
        std::to_string(max_commit_seconds_) + "\n";
  }
  auto backlog = store_.OutboxSize();
  if (backlog.ok())
    extra +=
        "# HELP sagad_outbox_backlog Outbox messages not yet delivered to "
        "every webhook.\n"
        "# TYPE sagad_outbox_backlog gauge\nsagad_outbox_backlog " +
        std::to_string(*backlog) + "\n";
  return metrics_.Render(extra);
}

auto Engine::Impl::OwnedLease(const std::string& id) -> std::optional<Lease> {
  std::lock_guard<std::mutex> l(lease_mu_);
  auto it = owned_.find(id);
  if (it == owned_.end()) return std::nullopt;
  return it->second;
}

auto Engine::Impl::Own(const std::string& id, const Lease& lease) -> void {
  std::lock_guard<std::mutex> l(lease_mu_);
  owned_[id] = lease;
}

auto Engine::Impl::Disown(const std::string& id) -> void {
  std::lock_guard<std::mutex> l(lease_mu_);
  owned_.erase(id);
}

auto Engine::Impl::Token(const std::string& id) -> uint64_t {
  auto l = OwnedLease(id);
  return l ? l->generation : 0;
}

auto Engine::Impl::EnsureOwned(const std::string& id) -> bool {
  if (OwnedLease(id)) return true;
  auto lease =
      store_.AcquireLease(id, owner_, clock_.NowMillis(), options_.lease_ms,
                          options_.coordinator_id + "/");
  if (!lease.ok()) return false;
  Own(id, *lease);
  Evict(id);
  EngineLog({{"msg", "lease acquired"},
             {"instance", id},
             {"generation", lease->generation}});
  return true;
}

auto Engine::Impl::Heartbeat() -> void {
  if (Stopping()) return;
  const int64_t now = clock_.NowMillis();
  std::vector<std::string> mine;
  {
    std::lock_guard<std::mutex> l(lease_mu_);
    for (const auto& [id, lease] : owned_) mine.push_back(id);
  }
  if (!mine.empty()) {
    auto lost = store_.RenewLeases(owner_, mine, now, options_.lease_ms);
    if (lost.ok()) {
      for (const auto& id : *lost) {
        Disown(id);
        Evict(id);
        EngineLog({{"msg", "lease lost"}, {"instance", id}});
      }
      std::lock_guard<std::mutex> l(lease_mu_);
      for (auto& [id, lease] : owned_)
        lease.expires_at = now + options_.lease_ms;
    }
  }
  auto active = store_.ListActive();
  if (active.ok()) {
    for (const auto& a : *active) {
      const std::string& id = a.id;
      if (OwnedLease(id)) {
        std::shared_ptr<Instance> cached;
        {
          std::lock_guard<std::mutex> l(cache_mu_);
          auto it = cache_.find(id);
          if (it != cache_.end()) cached = it->second;
        }
        if (cached && a.version != cached->version()) {
          Evict(id);
          Schedule(id);
        }
        continue;
      }
      auto lease = store_.GetLease(id);
      if (!lease.ok() || lease->expires_at <= now) Schedule(id);
    }
  }
  ScheduleHeartbeat();
}

auto Engine::Impl::Sweep() -> void {
  const int64_t cutoff = clock_.NowMillis() - options_.retention_ms;
  for (int round = 0; round < 50 && !Stopping(); ++round) {
    auto ids = store_.DeleteFinished(cutoff, 100);
    if (!ids.ok()) {
      EngineLog({{"msg", "retention sweep failed"},
                 {"error", ids.status().ToString()}});
      break;
    }
    for (const auto& id : *ids) Evict(id);
    metrics_.Inc("sagad_retention_deleted_total", "",
                 static_cast<double>(ids->size()));
    if (ids->size() < 100) break;
  }
  if (!Stopping()) ScheduleSweep();
}

auto Engine::Impl::ScheduleSweep() -> void {
  auto timer = std::make_shared<boost::asio::steady_timer>(io_);
  timer->expires_after(std::chrono::milliseconds(
      std::clamp<int64_t>(options_.retention_ms / 4, 50, 1000)));
  timer->async_wait([this, timer](const boost::system::error_code& ec) {
    if (!ec) boost::asio::post(pool_, [this] { Sweep(); });
  });
}

auto Engine::Impl::ScheduleHeartbeat() -> void {
  auto timer = std::make_shared<boost::asio::steady_timer>(io_);
  timer->expires_after(
      std::chrono::milliseconds(std::max<int64_t>(50, options_.lease_ms / 3)));
  timer->async_wait([this, timer](const boost::system::error_code& ec) {
    if (!ec) boost::asio::post(pool_, [this] { Heartbeat(); });
  });
}

auto Engine::Impl::FindStep(const Instance& inst, const std::string& step)
    -> int {
  return inst.StepIndex(step);
}

auto Engine::Impl::stripe(const std::string& id) -> std::mutex& {
  return stripes_[std::hash<std::string>()(id) % kStripes];
}

auto Engine::Impl::cache_put(const std::string& id,
                             std::shared_ptr<Instance> inst) -> void {
  std::lock_guard<std::mutex> l(cache_mu_);
  if (IsTerminal(inst->status()))
    cache_.erase(id);
  else
    cache_[id] = std::move(inst);
}

auto Engine::Impl::AgreesWithSnapshot(const Instance& inst,
                                      const nlohmann::json& snap) -> bool {
  const nlohmann::json& steps =
      snap.contains("steps") ? snap["steps"] : nlohmann::json();
  if (snap.value("status", "") != SagaStatusName(inst.status()) ||
      snap.value("last_seq", int64_t(0)) != inst.last_seq() ||
      !steps.is_array() || steps.size() != inst.steps().size())
    return false;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].value("status", "") != StepStatusName(inst.step(i).status()))
      return false;
  return true;
}

auto Engine::Impl::LoadLocked(const std::string& id)
    -> StatusOr<std::shared_ptr<Instance>> {
  {
    std::lock_guard<std::mutex> l(cache_mu_);
    auto it = cache_.find(id);
    if (it != cache_.end()) return it->second;
  }
  auto snap = store_.GetInstance(id);
  if (!snap.ok()) return snap.status();
  auto events = store_.GetEvents(id);
  if (!events.ok()) return events.status();
  auto inst = Instance::Replay(id, *events);
  if (!inst.ok()) return inst.status();
  inst->set_version(snap->value("version", uint64_t(0)));
  // A quick look for a snapshot that disagrees with the log (the full
  // comparison is `sagactl verify`, offline): saga and step states.
  if (!AgreesWithSnapshot(*inst, *snap))
    EngineLog(
        {{"msg", "snapshot differs from replayed event log; using the log"},
         {"instance", id}});
  EngineLog(
      {{"msg", "replayed"}, {"instance", id}, {"events", events->size()}});
  auto ptr = std::make_shared<Instance>(std::move(*inst));
  cache_put(id, ptr);
  return ptr;
}

auto Engine::Impl::Load(const std::string& id)
    -> StatusOr<std::shared_ptr<const Instance>> {
  std::lock_guard<std::mutex> l(stripe(id));
  auto r = LoadLocked(id);
  if (!r.ok()) return r.status();
  return std::shared_ptr<const Instance>(
      *r);  // cached instances are never changed in place
}

auto Engine::Impl::Evict(const std::string& id) -> void {
  std::lock_guard<std::mutex> l(cache_mu_);
  cache_.erase(id);
}

auto Engine::Impl::Mutate(const std::string& id,
                          const std::function<Status(Tx&)>& fn, bool as_owner)
    -> Status {
  std::optional<Lease> lease;
  if (as_owner) {
    lease = OwnedLease(id);
    if (!lease) return FailedPrecondition("lease lost: not the owner of " + id);
  }
  std::lock_guard<std::mutex> l(stripe(id));
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto cur = LoadLocked(id);
    if (!cur.ok()) return cur.status();
    auto next = std::make_shared<Instance>(**cur);
    Tx tx(*next, clock_.NowMillis());
    SAGAD_RETURN_IF_ERROR(fn(tx));
    if (tx.events().empty()) return Status::Ok();
    next->set_version((*cur)->version() + 1);
    auto t0 = std::chrono::steady_clock::now();
    auto snapshot = std::make_shared<const nlohmann::json>(next->ToJson());
    Status s = store_.Commit(
        id, (*cur)->version(), *snapshot, tx.events(), tx.Operations(),
        OutboxMessages(*next, tx.events()), lease ? &*lease : nullptr);
    RecordCommit(std::chrono::steady_clock::now() - t0);
    if (s.code() == StatusCode::kFailedPrecondition &&
        s.message().rfind("lease lost", 0) == 0) {  // fenced: drop the instance
      Disown(id);
      Evict(id);
      EngineLog({{"msg", "lease lost; dropping instance"}, {"instance", id}});
      return s;
    }
    if (s.code() == StatusCode::kFailedPrecondition) {  // lost a race: reload
      Evict(id);
      continue;
    }
    if (!s.ok()) {
      Evict(id);
      return s;
    }
    cache_put(id, next);
    if (IsTerminal(next->status())) Disown(id);
    if (options_.on_outbox && options_.outbox) options_.on_outbox();
    for (const Event& e : tx.events()) {
      metrics_.Inc("sagad_events_total", "type=\"" + e.type + "\"");
      if (e.type == "saga_needs_review")
        metrics_.Inc("sagad_escalations_total");
      if (e.type == "started" && e.data.value("attempt", 1) > 1)
        metrics_.Inc("sagad_retries_total");
    }
    if (Engine::IsSettled(SagaStatusName(next->status())))
      waiters_.Notify(id, snapshot);
    return Status::Ok();
  }
  return Unavailable("instance " + id + " keeps changing under us; try again");
}

auto Engine::Impl::EndInflight(const std::string& key) -> void {
  std::lock_guard<std::mutex> l(submit_mu_);
  inflight_.erase(key);
}

auto Engine::Impl::store() -> Store& { return store_; }

}  // namespace sagad
