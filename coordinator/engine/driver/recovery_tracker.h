// RecoveryTracker: the instances found unfinished at start-up that this
// process has not resumed yet (their first action since the restart is not
// done). While any waits, the driver runs round robin (every recovered
// instance is resumed before any runs to its end); that mode is bounded in
// time, so an instance that is somehow never resumed cannot keep the process
// in it.
// Thread-safety: Begin is called once, before the instances it names are
// scheduled (Engine::Start), so the set it writes is never written again:
// every other method may then be called from any thread, without a lock
// (each id's flag is taken once, by an atomic exchange).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

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
  size_t waiting() const { return waiting_.load(); }

 private:
  // True the first time `id`, one of Begin's, stops waiting.
  bool Take(const std::string& id);

  std::atomic<bool> begun_{false};
  TimePoint start_{};
  std::unordered_map<std::string, size_t> index_;  // written by Begin only
  std::unique_ptr<std::atomic<bool>[]> done_;      // by index_, set once
  std::atomic<size_t> waiting_{0};
};

}  // namespace sagad
