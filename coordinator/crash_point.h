// Named crash points for real-process crash tests.
//
// SAGA_CRASH_AT=<point>[:<n>] makes the process _exit(75) the n-th time
// (default: the first) it reaches CrashPoint("<point>"). Unset: one
// predictable branch per call. Points used by the engine:
//   after_create                 instance durable, submit response not sent
//   before_started               step about to be marked STARTED
//   after_started                STARTED durable, request not sent
//   before_outcome               response received, outcome not written
//   after_outcome                outcome durable
//   before_compensation_started / after_compensation_started /
//   before_compensation_outcome / after_compensation_outcome
#pragma once

namespace sagad {

// Reads SAGA_CRASH_AT. Call once at start-up, before any thread starts.
void InitCrashPointsFromEnv();
void CrashPoint(const char* name);

}  // namespace sagad
