#include "coordinator/engine/actions/guard_gate.h"

#include "util/check.h"

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

auto GuardGate::QueuesOf(const std::string& key) -> Queues& {
  SAGAD_CHECK(executor_.OnOwner(OwnerOf(key))) << "a guard's queue off its owner's thread";
  return queues_[executor_.OwnerThreadOf(OwnerOf(key))];
}

void GuardGate::Run(const std::string& key, std::function<void(Task release)> fn) {
  executor_.PostTo(OwnerOf(key), [this, key, fn = std::move(fn)]() mutable {
    Queue& q = QueuesOf(key)[key];
    q.push_back(std::move(fn));
    if (q.size() == 1) Start(key);  // else it starts once those before it release
  });
}

void GuardGate::Start(const std::string& key) {
  std::function<void(Task)> fn = QueuesOf(key)[key].front();
  Task release = [this, key] {
    executor_.PostTo(OwnerOf(key), [this, key] {
      Queues& queues = QueuesOf(key);
      auto it = queues.find(key);
      it->second.pop_front();
      if (it->second.empty()) {
        queues.erase(it);
        return;
      }
      Start(key);
    });
  };
  executor_.Post([fn = std::move(fn), release = std::move(release)] { fn(release); });
}

}  // namespace sagad
