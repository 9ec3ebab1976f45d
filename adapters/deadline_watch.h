// DeadlineWatch: runs a function when a deadline passes, unless disarmed
// first. HttpAdapter arms one per attempt with the client's stop(): the
// blocking client then gives up at `timeout_ms` after the attempt began,
// whatever the downstream does (a reply dripped a byte at a time resets a
// per-read timeout for ever, never this one).
// Real (monotonic) time: this is an edge of the process, not the engine.
// Thread-safety: every method may be called from any thread. `on_expiry`
// runs on the watch's thread with its lock held: once Disarm returns it is
// not running and never will.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "util/mutex.h"

namespace sagad {

class DeadlineWatch {
 public:
  DeadlineWatch();
  ~DeadlineWatch();
  DeadlineWatch(const DeadlineWatch&) = delete;
  DeadlineWatch& operator=(const DeadlineWatch&) = delete;

  // A handle for Disarm.
  uint64_t Arm(std::chrono::steady_clock::time_point deadline, std::function<void()> on_expiry);
  // True if the deadline had passed and `on_expiry` ran.
  bool Disarm(uint64_t handle);

 private:
  void Run();

  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  uint64_t next_ GUARDED_BY(mu_) = 1;
  // deadline -> (handle, function); and the handles that fired, until disarmed.
  std::multimap<std::chrono::steady_clock::time_point, std::pair<uint64_t, std::function<void()>>>
      armed_ GUARDED_BY(mu_);
  std::map<uint64_t, std::chrono::steady_clock::time_point> deadlines_ GUARDED_BY(mu_);
  std::set<uint64_t> fired_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace sagad
