// Properties of policies/deadlines.h over generated instances and times
// (fixed seeds: a failure names its case and replays): nothing runs out
// early, the wake-up it gives is exact, what ran out stays out, nothing is
// forgotten, and the order of the three clocks holds.
#include "policies/deadlines.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "examples/examples.h"
#include "policies/planner.h"

namespace sagad {
namespace {

constexpr int kCases = 3000;
constexpr int64_t kYearMs = 365LL * 24 * 3600 * 1000;

// A generated case: incident_response (four steps in a line, the last
// irreversible) with random deadlines and approval timeouts, or a run with an
// idle timeout; an instance taken through random events at random times.
struct Case {
  SagaDefinition def;
  Instance inst;
  std::mt19937_64 rng;
  int64_t at = 0;  // the time of the last event

  explicit Case(uint64_t seed) : rng(seed) {
    at = 1'700'000'000'000 + Int(0, 1000000);
    if (Int(0, 4) == 0) {
      def.name = "tools";
      def.run = true;
      def.idle_timeout_ms = Int(0, 2) ? Int(1, 600000) : 0;
      def.deadline_ms = Int(0, 1) ? Int(1, 600000) : 0;
      Add(Instance::CreatedEvent("r1", def, nlohmann::json::object(), nullptr, {{"agent", "bot"}}));
      Walk(nullptr);
      return;
    }
    def = IncidentResponse();
    def.deadline_ms = Int(0, 1) ? Int(1, 600000) : 0;
    for (StepDefinition& sd : def.steps) {
      sd.approval_timeout_ms = Int(0, 1) ? Int(1, 600000) : 0;
      sd.approval_timeout_action = Int(0, 1) ? "reject" : "escalate";
    }
    Add(Instance::CreatedEvent("i1", def, {{"title", "t"}}));
    Walk(&def);
  }
  int64_t Int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
  bool Add(Event e) {
    e.seq = inst.last_seq() + 1;
    at += Int(0, 300000);
    e.at_ms = at;
    return inst.Apply(e).ok();
  }
  bool Step(const std::string& step, StepEvent ev) {
    Event e;
    e.type = StepEventName(ev);
    e.step = step;
    return Add(e);
  }
  bool Saga(SagaEvent ev) {
    Event e;
    e.type = SagaEventName(ev);
    return Add(e);
  }
  // Each step in turn: committed, waiting for approval, in flight, or
  // left planned; then the saga waits, turns back, stops for review, or
  // goes on.
  void Walk(const SagaDefinition* saga) {
    bool awaiting = false;
    for (size_t i = 0; saga && i < saga->steps.size(); ++i) {
      const std::string& s = saga->steps[i].name;
      const int64_t r = Int(0, 3);
      if (r == 0) break;
      if (r == 1) {
        ASSERT_TRUE(Step(s, StepEvent::kStart) && Step(s, StepEvent::kCommit));
        continue;
      }
      if (r == 2) {
        ASSERT_TRUE(Step(s, StepEvent::kRequestApproval));
        awaiting = true;
        continue;
      }
      ASSERT_TRUE(Step(s, StepEvent::kStart));
      break;
    }
    switch (Int(0, 5)) {
      case 0:
        if (awaiting) {
          ASSERT_TRUE(Saga(SagaEvent::kWaitForApproval));
        }
        break;
      case 1:
        ASSERT_TRUE(Saga(SagaEvent::kStartCompensation));
        break;
      case 2:
        ASSERT_TRUE(Saga(SagaEvent::kEscalate));
        break;
      default:
        break;
    }
  }
  DueDeadline At(int64_t now) const { return NextDeadline(def, inst, now); }
  // When the clock `due` names ran out (what the instance says, not the policy).
  int64_t RanOutAt(const DueDeadline& due) const {
    switch (due.kind) {
      case DeadlineKind::kSagaDeadline:
        return inst.created_at() + def.deadline_ms;
      case DeadlineKind::kRunIdle:
        return inst.updated_at() + def.idle_timeout_ms;
      case DeadlineKind::kApprovalTimeout:
        return inst.step(due.step).approval_requested_at + def.steps[due.step].approval_timeout_ms;
      case DeadlineKind::kNone:
        break;
    }
    return 0;
  }
  // Times worth asking at: around the creation, each event, each deadline.
  std::vector<int64_t> Times() {
    std::vector<int64_t> t = {inst.created_at(), inst.updated_at(), at + 1, at + kYearMs};
    for (int k = 0; k < 8; ++k) t.push_back(inst.created_at() + Int(0, 1200000));
    return t;
  }
};

bool Active(const Instance& inst) {
  return inst.status() == SagaStatus::kRunning || inst.status() == SagaStatus::kAwaitingApproval;
}

// fn(case, now, what to name in a failure) for every case and time worth asking at.
template <typename Fn>
void ForEachCase(Fn fn) {
  for (int k = 0; k < kCases; ++k) {
    Case c(k);
    for (int64_t now : c.Times())
      fn(c, now,
         "case " + std::to_string(k) + " at +" + std::to_string(now - c.inst.created_at()) + " ms");
  }
}

TEST(DeadlinesTest, NothingRunsOutEarlyAndTheStepItNamesIsWaitingForApproval) {
  ForEachCase([&](Case& c, int64_t now, const std::string& at) {
    DueDeadline due = c.At(now);
    if (due.kind == DeadlineKind::kNone) return;
    EXPECT_TRUE(Active(c.inst)) << at;
    EXPECT_GE(now, c.RanOutAt(due)) << at;
    EXPECT_EQ(due.next_ms, 0) << at;
    if (due.kind == DeadlineKind::kApprovalTimeout) {
      ASSERT_GE(due.step, 0) << at;
      EXPECT_EQ(c.inst.step(due.step).status(), StepStatus::kAwaitingApproval) << at;
      EXPECT_GT(c.def.steps[due.step].approval_timeout_ms, 0) << at;
    }
    if (due.kind == DeadlineKind::kSagaDeadline) {
      EXPECT_LT(PivotInPlay(c.def, c.inst), 0) << at;  // past the pivot, nothing turns back
    }
    if (due.kind == DeadlineKind::kRunIdle) {
      EXPECT_TRUE(c.def.run && c.inst.Settled()) << at;
      EXPECT_EQ(c.inst.status(), SagaStatus::kRunning) << at;
    }
  });
}

// The wake-up is exact: nothing has run out a millisecond before it, and
// something has at it. Without one, nothing ever runs out.
TEST(DeadlinesTest, TheWakeUpIsExactAndNothingIsForgotten) {
  int woken = 0;
  ForEachCase([&](Case& c, int64_t now, const std::string& at) {
    DueDeadline due = c.At(now);
    if (due.kind != DeadlineKind::kNone) return;
    if (due.next_ms == 0) {
      EXPECT_EQ(c.At(now + 10 * kYearMs).kind, DeadlineKind::kNone) << at;
      return;
    }
    ++woken;
    EXPECT_GT(due.next_ms, now) << at;
    EXPECT_EQ(c.At(due.next_ms - 1).kind, DeadlineKind::kNone) << at;
    DueDeadline then = c.At(due.next_ms);
    EXPECT_NE(then.kind, DeadlineKind::kNone) << at;
    EXPECT_EQ(c.RanOutAt(then), due.next_ms) << at;
  });
  EXPECT_GT(woken, kCases / 4);  // the generator does reach wake-ups
}

// What ran out stays out while the instance does not change, and the
// saga's deadline comes first (then a run's silence, then approvals in
// step order).
TEST(DeadlinesTest, WhatRanOutStaysOutAndTheClocksKeepTheirOrder) {
  int each[4] = {0, 0, 0, 0};
  ForEachCase([&](Case& c, int64_t now, const std::string& at) {
    DueDeadline due = c.At(now);
    ++each[static_cast<int>(due.kind)];
    if (due.kind == DeadlineKind::kNone) return;
    DueDeadline later = c.At(now + c.Int(0, kYearMs));
    EXPECT_NE(later.kind, DeadlineKind::kNone) << at;
    EXPECT_LE(static_cast<int>(later.kind), static_cast<int>(due.kind)) << at;
    if (later.kind == due.kind && due.kind == DeadlineKind::kApprovalTimeout) {
      EXPECT_LE(later.step, due.step) << at;
    }
    const bool saga_out = c.def.deadline_ms > 0 && PivotInPlay(c.def, c.inst) < 0 &&
                          now >= c.inst.created_at() + c.def.deadline_ms;
    EXPECT_EQ(due.kind == DeadlineKind::kSagaDeadline, saga_out) << at;
  });
  for (int kind = 0; kind < 4; ++kind) EXPECT_GT(each[kind], 0) << "kind " << kind;
}

TEST(DeadlinesTest, NothingRunsOutForASagaThatIsNeitherRunningNorWaitingForApproval) {
  for (int k = 0; k < kCases; ++k) {
    Case c(k);
    if (Active(c.inst)) continue;
    for (int64_t now : c.Times()) {
      DueDeadline due = c.At(now);
      EXPECT_EQ(due.kind, DeadlineKind::kNone) << "case " << k;
      EXPECT_EQ(due.next_ms, 0) << "case " << k;
    }
  }
}

}  // namespace
}  // namespace sagad
