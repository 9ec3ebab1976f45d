// Clock: the only way sagad reads time. Inject a Clock&; tests use FakeClock
// (tests/testing/fake_clock.h). Thread-safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>

namespace sagad {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time in milliseconds since the Unix epoch (for records/events).
  virtual int64_t NowMillis() const = 0;
  // Monotonic time for deadlines and latencies.
  virtual std::chrono::steady_clock::time_point SteadyNow() const = 0;
};

class SystemClock : public Clock {
 public:
  // Clock
  int64_t NowMillis() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  std::chrono::steady_clock::time_point SteadyNow() const override {
    return std::chrono::steady_clock::now();
  }
};

}  // namespace sagad
