// Named crash points for real-process crash tests.
//
// SAGA_CRASH_AT=<point>[:<n>] makes the process _exit(75) the n-th time
// (default: the first) it reaches CrashPoint(<point>). Unset: one
// predictable branch per call. The points (CrashAt, named as the variable
// spells them):
//   after_create                 instance durable, submit response not sent
//   before_started               step about to be marked STARTED
//   after_started                STARTED durable, request not sent
//   before_outcome               response received, outcome not written
//   after_outcome                outcome durable
//   before_compensation_started / after_compensation_started /
//   before_compensation_outcome / after_compensation_outcome
#pragma once

#include "util/status.h"

namespace sagad {

enum class CrashAt {
  kAfterCreate,
  kBeforeStarted,
  kAfterStarted,
  kBeforeOutcome,
  kAfterOutcome,
  kBeforeCompensationStarted,
  kAfterCompensationStarted,
  kBeforeCompensationOutcome,
  kAfterCompensationOutcome,
};

// SAGA_PAUSE_AT=<point>[:<n>] instead stops the process (SIGSTOP) there, for
// tests of a paused owner that loses its lease; SIGCONT resumes it.
//
// Reads SAGA_CRASH_AT and SAGA_PAUSE_AT. Call once at start-up, before any
// thread starts. InvalidArgument naming the variable and the point when it
// names none of the points (a test that would never crash).
Status InitCrashPointsFromEnv();
void CrashPoint(CrashAt point);

}  // namespace sagad
