#include "coordinator/server/stop_deadline.h"

#include <unistd.h>

#include "util/log.h"
#include "util/thread_role.h"

namespace sagad {

StopDeadline::~StopDeadline() {
  {
    MutexLock l(mu_);
    over_ = true;
  }
  cv_.NotifyAll();
  if (watcher_.joinable()) watcher_.join();
}

void StopDeadline::Arm(std::chrono::milliseconds limit) {
  if (watcher_.joinable()) return;
  auto deadline = std::chrono::steady_clock::now() + limit;
  watcher_ = std::thread([this, deadline, limit] {
    NameThread("sagad-stop");
    Watch(deadline, limit);
  });
}

void StopDeadline::Phase(const std::string& what) {
  MutexLock l(mu_);
  phase_ = what;
}

void StopDeadline::Watch(std::chrono::steady_clock::time_point deadline,
                         std::chrono::milliseconds limit) {
  MutexLock l(mu_);
  if (cv_.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) { return over_; })) return;
  EngineLog(LogLevel::kError, {{"msg", "stop did not finish in time; exiting 1"},
                               {"unfinished", phase_},
                               {"limit_ms", static_cast<int64_t>(limit.count())}});
  _exit(1);
}

}  // namespace sagad
