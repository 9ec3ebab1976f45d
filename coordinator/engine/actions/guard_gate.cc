#include "coordinator/engine/actions/guard_gate.h"

namespace sagad {

StatusOr<std::vector<GuardedCall>> PrincipalCalls(Store& store, const std::string& toolbox,
                                                  const std::string& principal,
                                                  const std::string& except) {
  InstanceFilter f;
  f.owner = principal;
  f.saga = toolbox;
  std::vector<GuardedCall> out;
  std::string cursor;
  size_t runs = 0;
  do {
    auto page = store.ListInstances(f, 500, cursor);
    if (!page.ok()) return page.status();
    for (const auto& run : page->instances) {
      if (++runs > kMaxGuardedRuns)
        return ResourceExhausted("'" + principal + "' has more than " +
                                 std::to_string(kMaxGuardedRuns) + " stored runs of '" + toolbox +
                                 "': its guards per principal cannot count them all");
      if (run.value("id", "") == except || !run.contains("calls") || !run["calls"].is_array())
        continue;
      for (const auto& c : run["calls"])
        out.push_back({c.value("tool", ""), c.value("arguments", nlohmann::json::object()),
                       c.value("status", ""), c.value("appended_at", int64_t{0})});
    }
    cursor = page->next_cursor;
  } while (!cursor.empty());
  return out;
}

void GuardGate::Run(const std::string& key, std::function<void(Task release)> fn) {
  {
    MutexLock l(mu_);
    auto& q = queues_[key];
    q.push_back(std::move(fn));
    if (q.size() > 1) return;  // runs once those before it release
  }
  Next(key);
}

void GuardGate::Next(const std::string& key) {
  std::function<void(Task)> fn;
  {
    MutexLock l(mu_);
    fn = queues_[key].front();
  }
  fn([this, key] {
    {
      MutexLock l(mu_);
      auto it = queues_.find(key);
      it->second.pop_front();
      if (it->second.empty()) {
        queues_.erase(it);
        return;
      }
    }
    executor_.Post([this, key] { Next(key); });
  });
}

}  // namespace sagad
