// Engine: what follows each commit, outbox messages, the ownership rounds
// (heartbeat, takeover noticed) and retention.

#include "coordinator/engine/engine_impl.h"

namespace sagad {

auto Engine::Impl::OutboxMessages(const Instance& inst, const std::vector<Event>& events)
    -> std::vector<nlohmann::json> {
  std::vector<nlohmann::json> out;
  if (!options_.outbox) return out;
  // What a webhook consumer would only see as noise: the records around a
  // send, the questions that settled nothing, the deferrals.
  static const std::set<std::string> kQuiet = {StepEventName(StepEvent::kStart),
                                               StepEventName(StepEvent::kNotExecuted),
                                               StepEventName(StepEvent::kBeginCompensation),
                                               StepEventName(StepEvent::kCompensationUnknown),
                                               StepNoteName(StepNote::kReconciled),
                                               StepNoteName(StepNote::kRetryDeferred)};
  for (const Event& e : events) {
    if (kQuiet.count(e.type)) continue;
    nlohmann::json m = {{"id", inst.id() + ":" + std::to_string(e.seq)},
                        {"type", e.type},
                        {"instance_id", inst.id()},
                        {"saga", inst.saga()},
                        {"saga_version", inst.saga_version()},
                        {"seq", e.seq},
                        {"at", e.at_ms},
                        {"status", inst.StatusName()}};
    if (!e.step.empty()) m["step"] = e.step;
    if (inst.trace().is_object()) m["trace_id"] = inst.trace().value("trace_id", "");
    for (const char* f : {"external_ref", "reason", "by", "error", "comment"})
      if (e.data.contains(f)) m[f] = e.data[f];
    out.push_back(std::move(m));
  }
  return out;
}

auto Engine::Impl::MetricsText() -> std::string {
  return metrics_.Text(store_) + metrics_.ServicesText(gates_.Views()) +
         metrics_.MemoryText(runs_.PendingWakes(), executor_.PendingTimers(), repo_.Cached());
}

auto Engine::Impl::Heartbeat() -> void {
  auto lost = ownership_.Renew();
  if (lost.ok())
    for (const auto& id : *lost) {
      repo_.Evict(id);
      EngineLog(LogLevel::kWarn, {{"msg", "lease lost"}, {"instance", id}});
    }
  // A pause or resume on another coordinator of the store.
  Status paused = RefreshPaused();
  if (!paused.ok())
    EngineLog(LogLevel::kError, {{"msg", "paused services unread"}, {"error", paused.ToString()}});
  // A definition another coordinator deployed.
  Status deployed = LoadDeployed(false);
  if (!deployed.ok())
    EngineLog(LogLevel::kError,
              {{"msg", "deployed definitions unread"}, {"error", deployed.ToString()}});
  const int64_t now = clock_.NowMillis();
  auto active = store_.ListActive();
  if (active.ok()) {
    for (const auto& a : *active) {
      const std::string& id = a.id;
      if (ownership_.Held(id)) {
        // Changed by another process (an approval over its API): plan again.
        // Not cached: a commit or a load failed (storage trouble); plan it
        // again too, so that no owned instance is left without a driver.
        uint64_t cached = repo_.CachedVersion(id);
        if (cached == 0 || a.version != cached) {
          repo_.Evict(id);
          Schedule(id);
        }
        continue;
      }
      auto lease = store_.GetLease(id);
      if (!lease.ok() || lease->expires_at <= now) Schedule(id);
    }
  }
}

auto Engine::Impl::Sweep() -> void {
  const int64_t cutoff = clock_.NowMillis() - options_.retention_ms;
  for (int round = 0; round < 50 && !runs_.Stopping(); ++round) {
    auto ids = store_.DeleteFinished(cutoff, 100);
    if (!ids.ok()) {
      EngineLog(LogLevel::kError,
                {{"msg", "retention sweep failed"}, {"error", ids.status().ToString()}});
      break;
    }
    for (const auto& id : *ids) repo_.Evict(id);
    metrics_.RetentionDeleted(ids->size());
    if (ids->size() < 100) break;
  }
}

auto Engine::Impl::Every(int64_t every_ms, std::function<bool()> fn, bool now) -> void {
  auto run = [this, every_ms, fn] {
    if (runs_.Stopping() || !fn()) return;
    Every(every_ms, fn, /*now=*/false);
  };
  if (now)
    executor_.Post(std::move(run));
  else
    executor_.PostAfter(every_ms, std::move(run));
}

auto Engine::Impl::Load(const std::string& id) -> StatusOr<std::shared_ptr<const Instance>> {
  return repo_.Peek(id);
}

auto Engine::Impl::Committed(const InstanceRepository::Commit& c) -> void {
  // The terminal commit released the lease in the store.
  if (IsTerminal(c.instance->status())) ownership_.Release(c.id);
  if (options_.on_outbox && options_.outbox) options_.on_outbox();
  metrics_.Committed(*c.events);
  waiters_.Notify(
      c.id, c.instance->Settled(),
      [&c] {
        return c.snapshot ? c.snapshot
                          : std::make_shared<const nlohmann::json>(c.instance->ToJson());
      },
      c.instance.get());
}

auto Engine::Impl::store() -> Store& { return store_; }

}  // namespace sagad
