// StopDeadline: SIGTERM ends sagad within a bound, whatever state it is in.
// Armed when the stop begins; each part of the stop names itself (Phase).
// If the stop has not ended when the deadline passes, one line names the
// part that did not finish and the process exits 1 at once (_exit: nothing
// more runs; everything durable is recovered by the next start, as after a
// crash). Disarmed by its destructor.
// Thread-safety: Arm, Phase and the destructor from the threads that stop
// sagad, one after the other (the drain's, then the main thread).
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "util/mutex.h"

namespace sagad {

class StopDeadline {
 public:
  StopDeadline() = default;
  ~StopDeadline();
  StopDeadline(const StopDeadline&) = delete;
  StopDeadline& operator=(const StopDeadline&) = delete;

  // Starts the count: the whole stop must end within `limit`.
  void Arm(std::chrono::milliseconds limit);
  // The part of the stop under way now (named in the line if it is late).
  void Phase(const std::string& what);

 private:
  void Watch(std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds limit);

  Mutex mu_;
  CondVar cv_;
  bool over_ GUARDED_BY(mu_) = false;
  std::string phase_ GUARDED_BY(mu_) = "stopping";
  std::thread watcher_;
};

}  // namespace sagad
