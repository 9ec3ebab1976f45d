// What a status means to whoever waits for it: when a `?wait` ends, when
// a run's call is answered 200 rather than 202, what a guard counts. One
// table of the statuses as views show them (the names of saga_machine.h and
// step_machine.h, a run's "OPEN", a call's "CANCELLED"), read by the
// engine's waiters, its Instance and the HTTP edge alike, so that no two
// places can disagree (leveldb's dbformat.h: one owner per vocabulary).
//
//   instance status      settled  decided
//   RUNNING / OPEN          -        -      (a run: settled when no call is under way)
//   AWAITING_APPROVAL       x        -      (a run: decided when every call is)
//   COMPENSATING            -        -
//   COMPLETED               x        x
//   COMPENSATED             x        x
//   NEEDS_REVIEW            x        x
//
//   call status          settled  decided  answered  counted
//   PLANNED                 -        -         -         x
//   STARTED                 -        -         -         x
//   UNKNOWN                 -        -         -         x
//   AWAITING_APPROVAL       -        -         x         x
//   COMMITTED               x        x         x         x
//   FAILED                  x        x         x         -
//   REJECTED                x        x         x         -
//   COMPENSATING            -        -         x         x
//   COMPENSATED             -        x         x         -
//   NEEDS_REVIEW            -        x         x         x
//   CANCELLED               -        x         x         -
//
// - settled: the instance needs nothing more from the engine right now; a
//   plain `?wait` on it ends (an OPEN run: when each of its calls is
//   settled, none under way, held or being undone).
// - decided: what was asked will not change unless someone else acts; a
//   `?wait` for a run's calls (or one call) ends.
// - answered: the call's own answer (200) rather than "under way" (202).
// - counted: a guard counts the call against its limit (it had, or may
//   still have, an effect).
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "sagas/saga_machine.h"
#include "sagas/step_machine.h"

namespace sagad {

// An instance's status (a run's "OPEN" is RUNNING), for the instance as a
// whole; a run's calls decide the rest (below).
bool SagaSettled(SagaStatus s);
bool SagaDecided(SagaStatus s);
// The same by the name a view shows; false for a name that is none.
bool SagaSettledName(const std::string& status);
bool SagaDecidedName(const std::string& status);

// A run's call, by the name its view shows (StepStatusName, or CANCELLED).
bool CallSettledName(const std::string& status);
bool CallDecided(const std::string& status);
bool CallAnswered(const std::string& status);
bool CallCounted(const std::string& status);
// The same as CallSettledName, by the machine's status (Instance::Settled).
bool CallSettled(StepStatus s);

}  // namespace sagad
