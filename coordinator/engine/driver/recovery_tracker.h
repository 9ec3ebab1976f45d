// RecoveryTracker: the instances found unfinished at start-up that this
// process has not resumed yet (their first action since the restart is not
// done). While any waits, the driver runs round robin (every recovered
// instance is resumed before any runs to its end); that mode is bounded in
// time, so an instance that is somehow never resumed cannot keep the process
// in it. Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "util/mutex.h"

namespace sagad {

class RecoveryTracker {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  static constexpr std::chrono::seconds kLongest{60};

  void Begin(const std::vector<std::string>& ids, TimePoint now);
  // Some instance still waits to be resumed, and kLongest has not passed.
  bool InProgress(TimePoint now) const;
  // `id` will not be resumed here (owned elsewhere, unreadable).
  void Forget(const std::string& id);
  // `id` was resumed: the seconds since Begin if it was waiting, else none.
  std::optional<double> Resumed(const std::string& id, TimePoint now);
  size_t waiting() const;

 private:
  mutable Mutex mu_;
  std::unordered_set<std::string> waiting_ GUARDED_BY(mu_);
  TimePoint start_ GUARDED_BY(mu_){};
};

}  // namespace sagad
