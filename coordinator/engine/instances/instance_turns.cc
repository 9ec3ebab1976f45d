#include "coordinator/engine/instances/instance_turns.h"

#include "util/check.h"

namespace sagad {

void InstanceTurns::Take(const std::string& id) {
  Shard& s = ShardOf(id);
  MutexLock l(s.mu);
  auto [it, fresh] = s.held.try_emplace(id);
  if (fresh) return;
  auto go = std::make_shared<bool>(false);
  auto cv = std::make_shared<CondVar>();
  it->second.push_back(Taker{nullptr, go, cv});
  cv->Wait(s.mu, [&]() REQUIRES(s.mu) { return *go; });
}

bool InstanceTurns::TryTake(const std::string& id) {
  Shard& s = ShardOf(id);
  MutexLock l(s.mu);
  return s.held.try_emplace(id).second;
}

void InstanceTurns::TakeAsync(const std::string& id, Task run) {
  Shard& s = ShardOf(id);
  {
    MutexLock l(s.mu);
    auto [it, fresh] = s.held.try_emplace(id);
    if (!fresh) {
      it->second.push_back(Taker{std::move(run), nullptr, nullptr});
      return;
    }
  }
  run();
}

void InstanceTurns::End(const std::string& id) {
  Shard& s = ShardOf(id);
  Taker next;
  {
    MutexLock l(s.mu);
    auto it = s.held.find(id);
    SAGAD_CHECK(it != s.held.end()) << "the turn of " << id << " ended but nobody held it";
    if (it->second.empty()) {
      s.held.erase(it);
      return;
    }
    next = std::move(it->second.front());
    it->second.pop_front();
    if (!next.run) *next.go = true;
  }
  if (next.run)
    next.run();
  else
    next.cv->NotifyOne();
}

size_t InstanceTurns::Waiting(const std::string& id) {
  Shard& s = ShardOf(id);
  MutexLock l(s.mu);
  auto it = s.held.find(id);
  return it == s.held.end() ? 0 : it->second.size();
}

}  // namespace sagad
