// Properties of policies/step_outcomes.h over many generated policies,
// steps and times (fixed seeds: a failure names its case and replays).
#include "policies/step_outcomes.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace sagad {
namespace {

constexpr int kCases = 5000;

// A generated case: a retry policy, a step (maybe with a deadline) and the
// time of its first send.
struct Case {
  RetryPolicy policy;
  StepDefinition step;
  int64_t first_sent_ms = 0;
  std::mt19937_64 rng;
  explicit Case(uint64_t seed) : rng(seed) {
    policy.max_attempts = Int(1, 10);
    policy.max_reconciliations = Int(1, 10);
    policy.initial_backoff_ms = Int(0, 2000);
    policy.max_backoff_ms = policy.initial_backoff_ms + Int(0, 60000);
    policy.multiplier = 1.0 + Int(0, 30) / 10.0;
    step.name = "s";
    step.deadline_ms = Int(0, 1) ? Int(1, 120000) : 0;
    first_sent_ms = 1'700'000'000'000 + Int(0, 1000000);
  }
  int64_t Int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
  UnitRandom Random() {
    return [this] { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); };
  }
  // A step sent `attempts` times (>= 1), the last one unclear if `unclear`.
  StepState Sent(int attempts, bool unclear) {
    StepState st;
    st.name = "s";
    st.key = "i1:s";
    st.attempts = attempts;
    st.first_sent_at = first_sent_ms;
    EXPECT_TRUE(st.machine.Process(StepEvent::kStart).ok());
    if (unclear) {
      EXPECT_TRUE(st.machine.Process(StepEvent::kOutcomeUnknown).ok());
      st.forward_in_doubt = true;
    }
    return st;
  }
  bool PastDeadline(int64_t now) const {
    return step.deadline_ms > 0 && now - first_sent_ms >= step.deadline_ms;
  }
};

bool Later(StepMove m) {
  return m == StepMove::kRetry || m == StepMove::kStayUnknown || m == StepMove::kAskAgain;
}

// Every "later" is at or after now and within the policy's cap.
void ExpectWithinTheCap(const Case& c, const StepNext& next, int64_t now, const std::string& at) {
  if (!Later(next.move)) return;
  EXPECT_GE(next.at_ms, now) << at;
  EXPECT_LE(next.at_ms, now + c.policy.max_backoff_ms) << at;
}

// A service that answers every send with 429: the step is sent at most
// max_attempts times (exactly that many without a deadline), then given
// up; never re-sent past its deadline.
TEST(StepOutcomesTest, AServiceThatNeverExecutesGetsAtMostMaxAttemptsSends) {
  for (int k = 0; k < kCases; ++k) {
    Case c(k);
    const std::string at = "case " + std::to_string(k);
    StepState st = c.Sent(1, false);
    int64_t now = c.first_sent_ms + c.Int(0, 1000);
    int sends = 1;
    for (;;) {
      StepNext next = ForwardNotExecuted(c.step, c.policy, st, now, c.Random());
      ExpectWithinTheCap(c, next, now, at);
      ASSERT_TRUE(next.move == StepMove::kRetry || next.move == StepMove::kGiveUp) << at;
      if (next.move == StepMove::kGiveUp) break;
      EXPECT_FALSE(c.PastDeadline(now)) << at;
      now = next.at_ms + c.Int(0, 100);  // taken up at (or a little after) its time
      ++st.retries;
      ++st.attempts;
      ++sends;
      ASSERT_LE(sends, c.policy.max_attempts) << at;
    }
    if (c.step.deadline_ms == 0) {
      EXPECT_EQ(sends, c.policy.max_attempts) << at;
    }
  }
}

// A "not executed" answer never makes a step whose earlier send is unclear
// look "never happened" (recorded not executed, so PLANNED): it stays
// UNKNOWN or goes to review, within max_attempts sends and the deadline.
TEST(StepOutcomesTest, NotExecutedAfterAnUnclearSendNeverPlansTheStepAgain) {
  for (int k = 0; k < kCases; ++k) {
    Case c(k + 100000);
    const std::string at = "case " + std::to_string(k);
    int attempts = static_cast<int>(c.Int(1, 12));
    StepState st = c.Sent(attempts, true);
    int64_t now = c.first_sent_ms + c.Int(0, 200000);
    StepNext next = ForwardNotExecuted(c.step, c.policy, st, now, c.Random());
    ExpectWithinTheCap(c, next, now, at);
    ASSERT_TRUE(next.move == StepMove::kStayUnknown || next.move == StepMove::kEscalate) << at;
    bool may = attempts < c.policy.max_attempts && !c.PastDeadline(now);
    EXPECT_EQ(next.move == StepMove::kStayUnknown, may) << at;
  }
}

// An unclear outcome whose answers never settle anything is asked about
// exactly max_reconciliations times, then reviewed; each wait is at least
// half of the backoff cap's start (equal jitter), within the cap.
TEST(StepOutcomesTest, AnOutcomeThatStaysUnclearIsAskedAtMostMaxReconciliationsTimes) {
  for (int k = 0; k < kCases; ++k) {
    Case c(k + 200000);
    const std::string at = "case " + std::to_string(k);
    int64_t now = c.first_sent_ms;
    int answers = 0;
    for (int before = 0;; ++before) {
      StepNext next = StillUnclear(c.policy, before, now, c.Random());
      ++answers;
      ExpectWithinTheCap(c, next, now, at);
      if (next.move == StepMove::kEscalate) break;
      ASSERT_EQ(next.move, StepMove::kAskAgain) << at;
      EXPECT_GE(next.at_ms - now, c.policy.initial_backoff_ms / 2) << at;
      now = next.at_ms;
      ASSERT_LE(answers, c.policy.max_reconciliations) << at;
    }
    EXPECT_EQ(answers, c.policy.max_reconciliations) << at;
  }
}

// Confirmed never to have happened: nothing is sent once the saga no longer
// runs; running, it is re-sent within max_attempts sends and the deadline,
// and a send cut off (STARTED, no answer) spends no retry-budget token.
TEST(StepOutcomesTest, NeverHappenedIsReSentOnlyWhileTheSagaRunsAndWithinItsBounds) {
  for (int k = 0; k < kCases; ++k) {
    Case c(k + 300000);
    const std::string at = "case " + std::to_string(k);
    int attempts = static_cast<int>(c.Int(1, 12));
    bool unclear = c.Int(0, 1) == 1;
    StepState st = c.Sent(attempts, unclear);
    bool running = c.Int(0, 3) != 0;
    int64_t now = c.first_sent_ms + c.Int(0, 200000);
    StepNext next = ForwardNeverHappened(c.step, c.policy, st, running, now, c.Random());
    ExpectWithinTheCap(c, next, now, at);
    if (!running) {
      EXPECT_EQ(next.move, StepMove::kStop) << at;
      continue;
    }
    bool may = attempts < c.policy.max_attempts && !c.PastDeadline(now);
    EXPECT_EQ(next.move, may ? StepMove::kRetry : StepMove::kGiveUp) << at;
    if (may) {
      EXPECT_EQ(next.interrupted, !unclear) << at;
    }
  }
}

// A compensation is never abandoned: re-sent until max_attempts sends, then
// reviewed by a human (never given up, whatever the deadline).
TEST(StepOutcomesTest, ACompensationIsReSentThenReviewedNeverGivenUp) {
  for (int k = 0; k < kCases; ++k) {
    Case c(k + 400000);
    const std::string at = "case " + std::to_string(k);
    int64_t now = c.first_sent_ms;
    int sends = 1;
    for (;;) {
      StepNext next = CompensationNotExecuted(c.policy, sends, now, c.Random());
      ExpectWithinTheCap(c, next, now, at);
      if (next.move == StepMove::kEscalate) break;
      ASSERT_EQ(next.move, StepMove::kRetry) << at;
      now = next.at_ms;
      ++sends;
      ASSERT_LE(sends, c.policy.max_attempts) << at;
    }
    EXPECT_EQ(sends, c.policy.max_attempts) << at;
  }
}

}  // namespace
}  // namespace sagad
