#include "coordinator/server/store_watchdog.h"

#include <algorithm>

#include "util/log.h"

namespace sagad {

StoreWatchdog::StoreWatchdog(const Store& store, int64_t watchdog_ms)
    : store_(store), watchdog_ms_(watchdog_ms) {}

std::chrono::milliseconds StoreWatchdog::every() const {
  return std::chrono::milliseconds(std::clamp<int64_t>(watchdog_ms_ / 10, 100, 1000));
}

void StoreWatchdog::Look() {
  const int64_t ms = store_.WritesStalled().count();
  if (ms >= watchdog_ms_ && !stalled_) {
    stalled_ = true;
    EngineLog(LogLevel::kWarn, {{"msg", "store stalled: writes queued and none finished"},
                                {"stalled_ms", ms},
                                {"watchdog_ms", watchdog_ms_}});
  } else if (ms < watchdog_ms_ && stalled_) {
    stalled_ = false;
    EngineLog({{"msg", "store moving again"}});
  }
}

}  // namespace sagad
