#include "coordinator/engine/run_table.h"

namespace sagad {

bool RunTable::Enter(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  if (stopping_) return false;
  if (running_.count(id)) {
    rerun_.insert(id);
    return false;
  }
  running_.insert(id);
  return true;
}

RunTable::After RunTable::Leave(const std::string& id, bool yield) {
  std::lock_guard<std::mutex> l(mu_);
  if (yield && !stopping_) {
    rerun_.erase(id);
    return After::kRequeue;
  }
  if (!stopping_ && rerun_.erase(id)) return After::kAgain;
  rerun_.erase(id);
  running_.erase(id);
  if (IdleLocked()) idle_cv_.notify_all();
  return After::kDone;
}

bool RunTable::TryMarkStep(const std::string& id, int step, int limit) {
  std::lock_guard<std::mutex> l(mu_);
  auto& steps = steps_[id];
  if (steps.count(step) || static_cast<int>(steps.size()) >= limit) {
    if (steps.empty()) steps_.erase(id);
    return false;
  }
  steps.insert(step);
  ++steps_under_way_;
  return true;
}

void RunTable::UnmarkStep(const std::string& id, int step) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = steps_.find(id);
  if (it == steps_.end() || !it->second.erase(step)) return;
  if (it->second.empty()) steps_.erase(it);
  --steps_under_way_;
  if (IdleLocked()) idle_cv_.notify_all();
}

bool RunTable::StepUnderWay(const std::string& id, int step) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = steps_.find(id);
  return it != steps_.end() && it->second.count(step);
}

bool RunTable::ClaimWake(const std::string& id, int64_t due_ms,
                         int64_t now_ms) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = wakes_.find(id);
  if (it != wakes_.end() && it->second <= due_ms && it->second > now_ms)
    return false;
  wakes_[id] = due_ms;
  return true;
}

void RunTable::WakeFired(const std::string& id, int64_t due_ms) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = wakes_.find(id);
  if (it != wakes_.end() && it->second == due_ms) wakes_.erase(it);
}

size_t RunTable::Busy() const {
  std::lock_guard<std::mutex> l(mu_);
  return running_.size() + static_cast<size_t>(steps_under_way_);
}

bool RunTable::Stopping() const {
  std::lock_guard<std::mutex> l(mu_);
  return stopping_;
}

bool RunTable::StopAndWait() {
  std::unique_lock<std::mutex> l(mu_);
  if (stopped_) return false;
  stopping_ = true;
  idle_cv_.wait(l, [this] { return IdleLocked(); });
  stopped_ = true;
  return true;
}

}  // namespace sagad
