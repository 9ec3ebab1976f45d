// One seed, start to end: draws a scenario and a workload from the seed,
// runs it on a World (world.h) with faults on, then a quiet phase with
// faults off, and checks the invariants (invariants.h) after every event
// that can break one (the downstreams check theirs as effects happen) and
// over the whole state at the end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sagad::sim {

struct RunOptions {
  int sagas = 0;  // instances per seed; 0: drawn from the seed (3-8)
  // Test-only: re-introduces one known bug (see docs/simulation.md), to
  // show the simulator finds it. Empty: none.
  std::string bug;
  bool trace = false;  // keep the trace even when the seed passes
};

struct SeedResult {
  bool ok = true;
  std::string violation;
  int sagas = 0;
  uint64_t events = 0;
  std::vector<std::string> trace;  // the last events before the end
};

SeedResult RunSeed(uint64_t seed, const RunOptions& options);

}  // namespace sagad::sim
