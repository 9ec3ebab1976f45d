// ManualClock: a Clock that moves only when a test moves it.
#pragma once

#include <atomic>
#include <chrono>

#include "util/clock.h"

namespace sagad::testing {

class ManualClock : public Clock {
 public:
  explicit ManualClock(int64_t now_ms = 1'700'000'000'000) : now_ms_(now_ms) {}
  int64_t NowMillis() const override { return now_ms_.load(); }
  std::chrono::steady_clock::time_point SteadyNow() const override {
    return std::chrono::steady_clock::time_point(std::chrono::milliseconds(now_ms_.load()));
  }
  void Advance(int64_t ms) { now_ms_ += ms; }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace sagad::testing
