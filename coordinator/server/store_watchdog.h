// StoreWatchdog: says once, in the log, when the store stalls (writes queued
// for watchdog_ms with none finished: Store::WritesStalled) and once when
// it moves again. /readyz and sagad_store_stalled read the same measure
// (coordinator/http). It has no thread: the API's event loop (on the main
// thread) calls Look every `every()` (watchdog_ms/10, at least 100 ms, at
// most 1 s); Look takes no lock that a write holds and never blocks.
// Thread-safety: one thread calls Look.
#pragma once

#include <chrono>
#include <cstdint>

#include "coordinator/store/store.h"

namespace sagad {

class StoreWatchdog {
 public:
  StoreWatchdog(const Store& store, int64_t watchdog_ms);
  StoreWatchdog(const StoreWatchdog&) = delete;
  StoreWatchdog& operator=(const StoreWatchdog&) = delete;

  // How often Look is to be called.
  std::chrono::milliseconds every() const;
  // One look at the store: a log line when it begins or ends a stall.
  void Look();

 private:
  const Store& store_;
  const int64_t watchdog_ms_;
  bool stalled_ = false;
};

}  // namespace sagad
