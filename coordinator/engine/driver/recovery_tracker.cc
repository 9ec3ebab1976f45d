#include "coordinator/engine/driver/recovery_tracker.h"

namespace sagad {

void RecoveryTracker::Begin(const std::vector<std::string>& ids, TimePoint now) {
  MutexLock l(mu_);
  start_ = now;
  waiting_.insert(ids.begin(), ids.end());
}

bool RecoveryTracker::InProgress(TimePoint now) const {
  MutexLock l(mu_);
  return !waiting_.empty() && now - start_ < kLongest;
}

void RecoveryTracker::Forget(const std::string& id) {
  MutexLock l(mu_);
  waiting_.erase(id);
}

std::optional<double> RecoveryTracker::Resumed(const std::string& id, TimePoint now) {
  MutexLock l(mu_);
  if (waiting_.empty() || !waiting_.erase(id)) return std::nullopt;
  return std::chrono::duration<double>(now - start_).count();
}

size_t RecoveryTracker::waiting() const {
  MutexLock l(mu_);
  return waiting_.size();
}

}  // namespace sagad
