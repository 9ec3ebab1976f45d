#include "adapters/deadline_watch.h"

namespace sagad {

DeadlineWatch::DeadlineWatch() : thread_([this] { Run(); }) {}

DeadlineWatch::~DeadlineWatch() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

uint64_t DeadlineWatch::Arm(std::chrono::steady_clock::time_point deadline,
                            std::function<void()> on_expiry) {
  MutexLock l(mu_);
  const uint64_t h = next_++;
  auto it = armed_.emplace(deadline, std::make_pair(h, std::move(on_expiry)));
  deadlines_[h] = deadline;
  if (it == armed_.begin()) cv_.NotifyAll();  // a new earliest deadline
  return h;
}

bool DeadlineWatch::Disarm(uint64_t handle) {
  MutexLock l(mu_);
  if (fired_.erase(handle)) return true;
  auto d = deadlines_.find(handle);
  if (d == deadlines_.end()) return false;
  for (auto [it, end] = armed_.equal_range(d->second); it != end; ++it)
    if (it->second.first == handle) {
      armed_.erase(it);
      break;
    }
  deadlines_.erase(d);
  return false;
}

void DeadlineWatch::Run() {
  MutexLock l(mu_);
  while (!stop_) {
    if (armed_.empty()) {
      cv_.Wait(mu_, [this]() REQUIRES(mu_) { return stop_ || !armed_.empty(); });
      continue;
    }
    auto first = armed_.begin();
    const auto due = first->first;
    if (std::chrono::steady_clock::now() < due) {
      // Until it is due, or an earlier deadline is armed, or the watch stops.
      cv_.WaitUntil(mu_, due, [this, due]() REQUIRES(mu_) {
        return stop_ || armed_.empty() || armed_.begin()->first < due;
      });
      continue;
    }
    const uint64_t h = first->second.first;
    std::function<void()> fn = std::move(first->second.second);
    armed_.erase(first);
    deadlines_.erase(h);
    fired_.insert(h);
    fn();  // under the lock: Disarm waits for it
  }
}

}  // namespace sagad
