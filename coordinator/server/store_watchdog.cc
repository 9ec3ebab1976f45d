#include "coordinator/server/store_watchdog.h"

#include <algorithm>

#include "util/log.h"
#include "util/thread_role.h"

namespace sagad {

StoreWatchdog::StoreWatchdog(const Store& store, int64_t watchdog_ms)
    : store_(store), watchdog_ms_(watchdog_ms), thread_([this] {
        NameThread("sagad-watchdog");
        Run();
      }) {}

StoreWatchdog::~StoreWatchdog() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void StoreWatchdog::Run() {
  const auto every = std::chrono::milliseconds(std::clamp<int64_t>(watchdog_ms_ / 10, 100, 1000));
  bool stalled = false;
  MutexLock l(mu_);
  while (!cv_.WaitFor(mu_, every, [&]() REQUIRES(mu_) { return stop_; })) {
    const int64_t ms = store_.WritesStalled().count();
    if (ms >= watchdog_ms_ && !stalled) {
      stalled = true;
      EngineLog(LogLevel::kWarn, {{"msg", "store stalled: writes queued and none finished"},
                                  {"stalled_ms", ms},
                                  {"watchdog_ms", watchdog_ms_}});
    } else if (ms < watchdog_ms_ && stalled) {
      stalled = false;
      EngineLog({{"msg", "store moving again"}});
    }
  }
}

}  // namespace sagad
