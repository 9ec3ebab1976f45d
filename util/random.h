// Random: the only way the engine draws random numbers (instance ids, the
// process's incarnation name, retry jitter). Production uses SystemRandom;
// the simulator (coordinator/sim/) a SeededRandom, so that one seed replays
// one run exactly.
// Thread-safety: SystemRandom (under a lock) and AtomicRandom (without one)
// are thread-safe; a SeededRandom is not (the simulator runs everything on
// one thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <random>

#include "util/mutex.h"

namespace sagad {

class Random {
 public:
  virtual ~Random() = default;
  // 64 uniformly distributed bits.
  virtual uint64_t Next() = 0;
  // Uniform in [0, 1).
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
};

// Seeded once from std::random_device.
class SystemRandom final : public Random {
 public:
  SystemRandom();
  uint64_t Next() override;
  // One for the whole process.
  static SystemRandom& Shared();

 private:
  Mutex mu_;
  std::mt19937_64 gen_ GUARDED_BY(mu_);
};

// The same sequence for the same seed, on every machine (SplitMix64).
// SplitMix64's output function: the bits of the counter value `z` mixed.
uint64_t SplitMixOf(uint64_t z);

class SeededRandom final : public Random {
 public:
  explicit SeededRandom(uint64_t seed) : state_(seed) {}
  uint64_t Next() override;
  // Uniform in [0, n); 0 when n is 0.
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }
  // True with probability p.
  bool Chance(double p) { return NextDouble() < p; }

 private:
  uint64_t state_;
};

// SeededRandom's sequence from a counter advanced atomically: safe from
// any thread without a lock (each Next takes the next counter value), and
// repeatable where one thread draws (the simulator).
class AtomicRandom final : public Random {
 public:
  explicit AtomicRandom(uint64_t seed) : state_(seed) {}
  uint64_t Next() override;

 private:
  std::atomic<uint64_t> state_;
};

}  // namespace sagad
