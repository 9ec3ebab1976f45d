#include "coordinator/engine/instances/run_table.h"

namespace sagad {

bool RunTable::Enter(const std::string& id) {
  MutexLock l(mu_);
  if (stopping_) return false;
  if (running_.count(id)) {
    rerun_.insert(id);
    return false;
  }
  running_.insert(id);
  return true;
}

RunTable::After RunTable::Leave(const std::string& id, bool yield) {
  MutexLock l(mu_);
  if (yield && !stopping_) {
    rerun_.erase(id);
    return After::kRequeue;
  }
  if (!stopping_ && rerun_.erase(id)) return After::kAgain;
  rerun_.erase(id);
  running_.erase(id);
  if (IdleLocked()) idle_cv_.NotifyAll();
  return After::kDone;
}

StepMark RunTable::TryMarkStep(const std::string& id, int step, int limit) {
  MutexLock l(mu_);
  // Stopping: no mark may outlive StopAndWait (nor this table).
  if (stopping_) return StepMark();
  auto& steps = steps_[id];
  if (steps.count(step) || static_cast<int>(steps.size()) >= limit) {
    if (steps.empty()) steps_.erase(id);
    return StepMark();
  }
  steps.insert(step);
  ++steps_under_way_;
  return StepMark(this, id, step);
}

void RunTable::UnmarkStep(const std::string& id, int step) {
  MutexLock l(mu_);
  auto it = steps_.find(id);
  if (it == steps_.end() || !it->second.erase(step)) return;
  if (it->second.empty()) steps_.erase(it);
  --steps_under_way_;
  if (IdleLocked()) idle_cv_.NotifyAll();
}

void RunTable::ReleaseThen(StepMark& mark, const Task& then) {
  {
    MutexLock l(mu_);
    ++ending_;
  }
  mark.Release();
  then();
  MutexLock l(mu_);
  --ending_;
  if (IdleLocked()) idle_cv_.NotifyAll();
}

bool RunTable::StepUnderWay(const std::string& id, int step) const {
  MutexLock l(mu_);
  auto it = steps_.find(id);
  return it != steps_.end() && it->second.count(step);
}

bool RunTable::ClaimWake(const std::string& id, int64_t due_ms, int64_t now_ms,
                         uint64_t* superseded) {
  *superseded = 0;
  MutexLock l(mu_);
  auto it = wakes_.find(id);
  if (it != wakes_.end() && it->second.due_ms <= due_ms && it->second.due_ms > now_ms) return false;
  if (it != wakes_.end()) *superseded = it->second.timer;
  wakes_[id] = Wake{due_ms, 0};
  return true;
}

bool RunTable::WakeSet(const std::string& id, int64_t due_ms, uint64_t handle) {
  MutexLock l(mu_);
  auto it = wakes_.find(id);
  if (it == wakes_.end() || it->second.due_ms != due_ms || it->second.timer != 0) return false;
  it->second.timer = handle;
  return true;
}

void RunTable::WakeFired(const std::string& id, int64_t due_ms) {
  MutexLock l(mu_);
  auto it = wakes_.find(id);
  if (it != wakes_.end() && it->second.due_ms == due_ms) wakes_.erase(it);
}

uint64_t RunTable::DropWake(const std::string& id) {
  MutexLock l(mu_);
  auto it = wakes_.find(id);
  if (it == wakes_.end()) return 0;
  const uint64_t timer = it->second.timer;
  wakes_.erase(it);
  return timer;
}

size_t RunTable::PendingWakes() const {
  MutexLock l(mu_);
  return wakes_.size();
}

void RunTable::AwaitReply(bool waiting) {
  MutexLock l(mu_);
  awaiting_replies_ += waiting ? 1 : -1;
}

size_t RunTable::Busy() const {
  MutexLock l(mu_);
  return running_.size() + static_cast<size_t>(steps_under_way_ - awaiting_replies_);
}

bool RunTable::Stopping() const {
  MutexLock l(mu_);
  return stopping_;
}

bool RunTable::StopAndWait() {
  MutexLock l(mu_);
  if (stopped_) return false;
  stopping_ = true;
  idle_cv_.Wait(mu_, [this]() REQUIRES(mu_) { return IdleLocked(); });
  stopped_ = true;
  return true;
}

}  // namespace sagad
