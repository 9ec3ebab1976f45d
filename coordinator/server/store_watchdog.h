// StoreWatchdog: says once, in the log, when the store stalls (writes queued
// for watchdog_ms with none finished: Store::WritesStalled) and once when
// it moves again. /readyz and sagad_store_stalled read the same measure
// (coordinator/http). Its own thread looks every watchdog_ms/10 (at least
// 100 ms, at most 1 s) and takes no lock that a write holds.
// Thread-safety: construct and destroy from one thread.
#pragma once

#include <cstdint>
#include <thread>

#include "coordinator/store/store.h"
#include "util/mutex.h"

namespace sagad {

class StoreWatchdog {
 public:
  StoreWatchdog(const Store& store, int64_t watchdog_ms);
  ~StoreWatchdog();
  StoreWatchdog(const StoreWatchdog&) = delete;
  StoreWatchdog& operator=(const StoreWatchdog&) = delete;

 private:
  void Run();

  const Store& store_;
  const int64_t watchdog_ms_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sagad
