#include "coordinator/engine/driver/recovery_tracker.h"

#include "util/check.h"

namespace sagad {

void RecoveryTracker::Begin(const std::vector<std::string>& ids, TimePoint now) {
  SAGAD_CHECK(!begun_.exchange(true)) << "recovery begins once";
  start_ = now;
  for (const auto& id : ids) index_.emplace(id, index_.size());
  done_.reset(new std::atomic<bool>[index_.size()]);
  for (size_t i = 0; i < index_.size(); ++i) done_[i].store(false);
  waiting_.store(index_.size());
}

bool RecoveryTracker::InProgress(TimePoint now) const {
  return waiting_.load() != 0 && now - start_ < kLongest;
}

bool RecoveryTracker::Take(const std::string& id) {
  if (waiting_.load() == 0) return false;  // the usual case, after start-up
  auto it = index_.find(id);
  if (it == index_.end() || done_[it->second].exchange(true)) return false;
  waiting_.fetch_sub(1);
  return true;
}

void RecoveryTracker::Forget(const std::string& id) { Take(id); }

std::optional<double> RecoveryTracker::Resumed(const std::string& id, TimePoint now) {
  if (!Take(id)) return std::nullopt;
  return std::chrono::duration<double>(now - start_).count();
}

}  // namespace sagad
