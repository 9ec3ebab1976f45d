// Step outcomes: what a step's state becomes when a send of it was not
// executed, when it is confirmed never to have happened, or when a question
// about an unclear send got an answer that settles nothing. Pure functions of
// the step's state, its retry policy, the time and an injected randomness;
// the engine (coordinator/engine/step_runner*.cc) records what they decide.
//
// The rules they keep (properties in tests/policies/step_outcomes_test.cc):
// - a send that was not executed never makes a step whose earlier send is
//   unclear look "never happened": it stays UNKNOWN, re-sent or reviewed;
// - a step is sent at most max_attempts times, and nothing is re-sent once
//   its deadline (from the first send) has passed;
// - an unclear outcome is asked about at most max_reconciliations times,
//   then a human decides; a compensation is never given up, only reviewed;
// - every "later" is at or after now, within the policy's backoff cap.
#pragma once

#include <cstdint>

#include "policies/retry_policy.h"
#include "sagas/definition.h"
#include "sagas/instance.h"

namespace sagad {

enum class StepMove {
  kRetry,        // recorded not executed: sent again with the same key at `at_ms`
  kGiveUp,       // recorded not executed, out of attempts: the saga gives up
  kStayUnknown,  // an earlier send is unclear: stays UNKNOWN, taken up at `at_ms`
  kEscalate,     // the step (and the saga) goes to review
  kAskAgain,     // the answer settled nothing: asked again at `at_ms`
  kStop,         // never happened and the saga no longer runs: nothing to send
};

struct StepNext {
  StepMove move;
  int64_t at_ms = 0;  // kRetry, kStayUnknown, kAskAgain: not before this wall ms
  // kRetry of a send cut off by a restart or a takeover (STARTED, then
  // confirmed never received): not the service's failure, so its re-send
  // takes no token of the service's retry budget.
  bool interrupted = false;
};

// A forward send of `st` came back "not executed" (429, refused connection).
StepNext ForwardNotExecuted(const StepDefinition& step, const RetryPolicy& policy,
                            const StepState& st, int64_t now_ms, const UnitRandom& random);

// The service says the forward operation of `st` (STARTED or UNKNOWN) never
// happened. `saga_running`: false once the saga turns back or stops.
StepNext ForwardNeverHappened(const StepDefinition& step, const RetryPolicy& policy,
                              const StepState& st, bool saga_running, int64_t now_ms,
                              const UnitRandom& random);

// An answer about an unclear operation (forward or compensation) that
// settles nothing; `asked_before` earlier answers settled nothing either.
StepNext StillUnclear(const RetryPolicy& policy, int asked_before, int64_t now_ms,
                      const UnitRandom& random);

// A compensation send came back "not executed" after `comp_attempts` (>= 1)
// sends: re-sent after a backoff, or reviewed (an undo is never abandoned).
StepNext CompensationNotExecuted(const RetryPolicy& policy, int comp_attempts, int64_t now_ms,
                                 const UnitRandom& random);

}  // namespace sagad
