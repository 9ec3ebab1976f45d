// The crash matrix's harness, shared by its three suites (a saga's list of
// steps, a graph's branches in flight at once, an agent's calls). A case
// names the crash point (SAGA_CRASH_AT: a CrashAt of util/crash_point.h),
// which time it is reached, the downstream (deduplicating or not) and the
// direction (forward, or undoing). CrashingSagad starts sagad to die there
// (exit 75) and starts it again, once, after it did; the verdict checks
// that the point was reached and that each effect happened exactly once.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "tests/testing/cluster.h"

namespace sagad::testing {

struct CrashCase {
  std::string point;
  int n;  // the n-th time any worker reaches the point
  bool dedup;
  bool compensation;
};

void PrintTo(const CrashCase& c, std::ostream* os);
// "after_started_2_dedup": the case's test name.
std::string CrashCaseName(const ::testing::TestParamInfo<CrashCase>& info);

// Each forward point (before/after STARTED, before/after the outcome)
// reached the 1st..forward_n-th time, against a deduplicating and a
// non-deduplicating downstream; each undo point the undo_from..undo_to-th
// time, against the downstreams `undo_dedup` names.
std::vector<CrashCase> CrashCases(int forward_n, int undo_from, int undo_to,
                                  const std::vector<bool>& undo_dedup = {true, false});

// The services of the example downstream a case's sagad is configured with:
// nothing to override (deduplicating), or each of `services` made
// non-deduplicating.
nlohmann::json ServicesFor(const CrashCase& c, const std::vector<std::string>& services);

class CrashingSagad {
 public:
  // Starts `sagad` to die at `c`'s point (fails the test if it does not
  // come up).
  CrashingSagad(Coordinator& sagad, const CrashCase& c);
  // Once it died at the point, starts it again (once). `must_have_died`:
  // it is dying (a request went unanswered), so wait for its end; else a
  // sagad still running is left alone.
  void Restart(bool must_have_died);
  bool crashed() const { return crashed_; }
  // The end of a case: a crash right after the last commit may come just
  // after a client saw the final status, so it is given a moment, then
  // restarted from; true when the point was reached.
  bool Reached();

 private:
  Coordinator& sagad_;
  bool crashed_ = false;
};

// No effect repeated, `total` effects in all, and each of `once` exactly
// once (`never`: not at all).
void ExpectEffects(Downstream& downstream, int total, const std::vector<std::string>& once,
                   const std::vector<std::string>& never = {});

}  // namespace sagad::testing
