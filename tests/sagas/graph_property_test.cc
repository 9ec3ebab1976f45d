// Property: over random graphs (up to 12 steps), an executor that does
// whatever the planner allows, in random order, with random outcomes,
// unclear answers, crashes (requests in flight forgotten, their steps left
// STARTED or COMPENSATING) and operator actions, never breaks the rules of
// parallel sagas, checked at every transition:
//   * no step starts before all its dependencies committed;
//   * no compensation starts while any forward step is in flight or unclear;
//   * reverse_topological: no step is undone before every committed step
//     that depends on it was undone;
//   * reverse_completion: undos never overlap and follow reverse commit order;
//   * a compensated saga undid every committed step exactly once;
//   * with a pivot: never COMPENSATED with the irreversible step
//     COMMITTED, and no undo starts once the pivot may have taken effect,
//     with approvals, cancels (refused across the pivot as OperatorActions
//     refuses them, and now and then accepted as an older sagad did, to
//     drive the drain) and failures injected.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "policies/planner.h"

namespace sagad {
namespace {

SagaDefinition RandomGraph(std::mt19937& rng) {
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  SagaBuilder b("g", 1);
  b.MaxParallel(1 + pick(4));
  b.CompensationOrder(pick(2) ? CompensationOrder::kReverseTopological
                              : CompensationOrder::kReverseCompletion);
  int n = 2 + pick(11);
  for (int i = 0; i < n; ++i) {
    std::string name = "s" + std::to_string(i);
    StepBuilder& st = b.Step(name).Call("svc", "POST", "/" + name).Compensate("svc", "POST", "/u");
    std::vector<std::string> after;
    for (int d = 0; d < i; ++d)
      if (pick(3) == 0) after.push_back("s" + std::to_string(d));
    if (pick(4) != 0) st.AfterSteps(after);  // else: after the one before
    if (pick(8) == 0) st.RequiresApproval();
  }
  auto def = b.Build();
  EXPECT_TRUE(def.ok()) << def.status().ToString();
  // Half the graphs get a pivot: a random step made irreversible, kept only
  // where it is a cut point (the definition checks refuse it elsewhere).
  if (pick(2)) {
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (int p : order) {
      SagaDefinition with_pivot = *def;
      with_pivot.steps[p].irreversible = true;
      with_pivot.steps[p].compensation.reset();
      with_pivot.steps[p].requires_approval = false;  // the planner asks anyway
      if (Validate(with_pivot).ok()) return with_pivot;
    }
  }
  return *def;
}

class GraphRun {
 public:
  GraphRun(const SagaDefinition& def, unsigned seed) : def_(def), rng_(seed) {
    Event e = Instance::CreatedEvent("i", def_, nlohmann::json::object());
    e.seq = 1;
    EXPECT_TRUE(inst_.Apply(e).ok());
  }

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  // Applies one event, checking the rules first. False if the machines refuse it.
  bool Apply(const std::string& step, const std::string& type) {
    int i = step.empty() ? -1 : inst_.StepIndex(step);
    if (type == "started" && inst_.step(i).status() == StepStatus::kPlanned) {
      for (int d : inst_.step(i).after)
        EXPECT_EQ(inst_.step(d).status(), StepStatus::kCommitted)
            << step << " started before its dependency " << inst_.step(d).name;
    }
    if (type == "compensation_started") CheckUndoMayStart(i);
    Event e;
    e.seq = inst_.last_seq() + 1;
    e.type = type;
    e.step = step;
    Instance next = inst_;
    if (!next.Apply(e).ok()) return false;
    inst_ = next;
    if (type == "compensated") ++undone_[i];
    CheckPivotRule(type);
    return true;
  }
  bool StepEv(int i, StepEvent ev) { return Apply(inst_.step(i).name, StepEventName(ev)); }
  bool SagaEv(SagaEvent ev) { return Apply("", SagaEventName(ev)); }

  void CheckPivotRule(const std::string& type) {
    if (inst_.status() == SagaStatus::kCompensated) {
      for (size_t k = 0; k < def_.steps.size(); ++k) {
        EXPECT_FALSE(def_.steps[k].irreversible && inst_.step(k).status() == StepStatus::kCommitted)
            << "COMPENSATED with the irreversible step " << def_.steps[k].name << " COMMITTED";
      }
    }
    if (type == "compensation_started") {
      int p = PivotInPlay(def_, inst_);
      EXPECT_LT(p, 0) << "an undo started while the pivot " << def_.steps[p].name << " is "
                      << StepStatusName(inst_.step(p).status());
    }
  }

  void CheckUndoMayStart(int i) {
    const int n = static_cast<int>(inst_.steps().size());
    for (int k = 0; k < n; ++k) {
      StepStatus s = inst_.step(k).status();
      EXPECT_FALSE(s == StepStatus::kStarted || s == StepStatus::kUnknown)
          << "undo of " << inst_.step(i).name << " while " << inst_.step(k).name << " is "
          << StepStatusName(s);
    }
    if (def_.compensation_order == CompensationOrder::kReverseTopological) {
      for (int k = 0; k < n; ++k) {
        if (inst_.step(k).commit_seq > 0 && inst_.IsAncestor(i, k)) {
          EXPECT_EQ(inst_.step(k).status(), StepStatus::kCompensated)
              << inst_.step(i).name << " undone before its dependent " << inst_.step(k).name;
        }
      }
    } else {
      for (int k = 0; k < n; ++k) {
        if (k == i) continue;
        EXPECT_NE(inst_.step(k).status(), StepStatus::kCompensating) << "undos overlap";
        if (inst_.step(k).commit_seq > inst_.step(i).commit_seq) {
          EXPECT_EQ(inst_.step(k).status(), StepStatus::kCompensated)
              << inst_.step(i).name << " undone before " << inst_.step(k).name
              << ", which committed later";
        }
      }
    }
  }

  // What the engine's GiveUp does on a definite failure: review once the
  // pivot may have taken effect, else turn back.
  void TurnBack() {
    if (inst_.status() != SagaStatus::kRunning) return;
    if (PivotInPlay(def_, inst_) >= 0) {
      SagaEv(SagaEvent::kEscalate);
      return;
    }
    ForceTurnBack();
  }
  void ForceTurnBack() {
    for (size_t k = 0; k < inst_.steps().size(); ++k)
      if (inst_.step(k).status() == StepStatus::kAwaitingApproval)
        StepEv(static_cast<int>(k), StepEvent::kReject);
    SagaEv(SagaEvent::kStartCompensation);
  }

  // Carries out one of the planned actions (not one already in flight).
  bool Act() {
    std::vector<Action> acts = NextActions(def_, inst_);
    std::vector<Action> open;
    for (const Action& a : acts)
      if (!IsStepAction(a.kind) || !inflight_.count(a.step)) open.push_back(a);
    if (open.empty()) return false;
    Action a = open[pick(static_cast<int>(open.size()))];
    switch (a.kind) {
      case ActionKind::kExecute:
        if (StepEv(a.step, StepEvent::kStart)) inflight_.insert(a.step);
        return true;
      case ActionKind::kReconcile: {
        int answer = pick(4);
        if (answer == 0)
          StepEv(a.step, StepEvent::kCommit);
        else if (answer == 1)
          StepEv(a.step, StepEvent::kNotExecuted);
        else if (answer == 3) {  // the downstream says it refused it
          if (StepEv(a.step, StepEvent::kConfirmRefused)) TurnBack();
        } else if (inst_.step(a.step).status() == StepStatus::kStarted)
          StepEv(a.step, StepEvent::kOutcomeUnknown);
        return true;
      }
      case ActionKind::kCompensate:
        if (StepEv(a.step, StepEvent::kBeginCompensation)) inflight_.insert(a.step);
        return true;
      case ActionKind::kReconcileCompensation:
        if (pick(2))
          StepEv(a.step, StepEvent::kCompensationDone);
        else if (StepEv(a.step, StepEvent::kBeginCompensation))
          inflight_.insert(a.step);  // re-send
        return true;
      case ActionKind::kStartCompensation:
        TurnBack();
        return true;
      case ActionKind::kRequestApproval:
        StepEv(a.step, StepEvent::kRequestApproval);
        if (NextAction(def_, inst_).kind == ActionKind::kAwaitApproval)
          SagaEv(SagaEvent::kWaitForApproval);
        return true;
      case ActionKind::kAwaitApproval:
        SagaEv(SagaEvent::kWaitForApproval);
        return true;
      case ActionKind::kComplete:
        SagaEv(SagaEvent::kComplete);
        return true;
      case ActionKind::kFinishCompensation:
        SagaEv(SagaEvent::kFinishCompensation);
        return true;
      case ActionKind::kGoForward: {  // as saga_turns' GoForward
        bool undone = false;
        for (const StepState& st : inst_.steps()) {
          StepStatus s = st.status();
          undone = undone || s == StepStatus::kCompensating || s == StepStatus::kCompensated ||
                   s == StepStatus::kFailed || s == StepStatus::kRejected ||
                   st.machine.reviewing_compensation();
        }
        SagaEv(undone ? SagaEvent::kEscalate : SagaEvent::kResume);
        ++went_forward_;
        return true;
      }
      default:
        return false;
    }
  }

  // A request in flight gets its answer.
  void Answer() {
    auto it = inflight_.begin();
    std::advance(it, pick(static_cast<int>(inflight_.size())));
    int i = *it;
    inflight_.erase(it);
    StepStatus s = inst_.step(i).status();
    int r = pick(4);
    if (s == StepStatus::kStarted) {
      if (r == 0)
        StepEv(i, StepEvent::kCommit);
      else if (r == 1)
        StepEv(i, StepEvent::kOutcomeUnknown);
      else if (r == 2)
        StepEv(i, StepEvent::kNotExecuted);
      else if (StepEv(i, StepEvent::kFail))
        TurnBack();
    } else if (s == StepStatus::kCompensating) {
      if (r <= 1)
        StepEv(i, StepEvent::kCompensationDone);
      else
        StepEv(i, StepEvent::kCompensationUnknown);
    }
  }

  void Operator() {
    SagaStatus ss = inst_.status();
    const int n = static_cast<int>(inst_.steps().size());
    int i = pick(n);
    if (inst_.step(i).status() == StepStatus::kAwaitingApproval) {
      if (pick(3)) {
        StepEv(i, StepEvent::kApprove);
        if (ss == SagaStatus::kAwaitingApproval) SagaEv(SagaEvent::kResume);
      } else if (StepEv(i, StepEvent::kReject)) {
        TurnBack();
        if (inst_.status() == SagaStatus::kAwaitingApproval) SagaEv(SagaEvent::kStartCompensation);
      }
    } else if (pick(10) == 0 &&
               (ss == SagaStatus::kRunning || ss == SagaStatus::kAwaitingApproval)) {
      // cancel: refused across the pivot (OperatorActions), except now and
      // then while the pivot is only in flight, as an older sagad accepted.
      int p = PivotInPlay(def_, inst_);
      if (p >= 0 && (inst_.step(p).status() == StepStatus::kCommitted || pick(2) != 0)) return;
      for (int k = 0; k < n; ++k)
        if (inst_.step(k).status() == StepStatus::kAwaitingApproval) StepEv(k, StepEvent::kReject);
      SagaEv(SagaEvent::kStartCompensation);
    }
  }

  void Go() {
    for (int round = 0; round < 2000 && !IsTerminal(inst_.status()); ++round) {
      int r = pick(10);
      if (r < 5) {
        if (!Act() && inflight_.empty()) Operator();
      } else if (r < 8 && !inflight_.empty()) {
        Answer();
      } else if (r == 8) {
        if (pick(5) == 0) inflight_.clear();  // crash: every request in flight forgotten
      } else {
        Operator();
      }
    }
    if (inst_.status() == SagaStatus::kCompensated) {
      for (size_t k = 0; k < inst_.steps().size(); ++k) {
        if (inst_.step(k).commit_seq > 0) {
          EXPECT_EQ(undone_[static_cast<int>(k)], 1)
              << inst_.step(k).name << " undone " << undone_[static_cast<int>(k)] << " times";
        }
      }
    }
    for (const auto& [k, n] : undone_) EXPECT_LE(n, 1);
  }

  SagaStatus status() const { return inst_.status(); }
  int went_forward() const { return went_forward_; }
  bool has_pivot() const {
    for (const auto& st : def_.steps)
      if (st.irreversible) return true;
    return false;
  }

 private:
  SagaDefinition def_;
  std::mt19937 rng_;
  Instance inst_;
  std::set<int> inflight_;
  std::map<int, int> undone_;
  int went_forward_ = 0;
};

TEST(GraphPropertyTest, RandomGraphsKeepTheRulesOfParallelSagas) {
  std::map<SagaStatus, int> ends;
  int pivots = 0, went_forward = 0;
  for (unsigned seed = 1; seed <= 1000; ++seed) {
    std::mt19937 rng(seed);
    SagaDefinition def = RandomGraph(rng);
    GraphRun run(def, seed * 7919);
    run.Go();
    ++ends[run.status()];
    pivots += run.has_pivot();
    went_forward += run.went_forward();
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "seed " << seed;
      return;
    }
  }
  // The runs reach both ends, so both paths were exercised.
  EXPECT_GT(ends[SagaStatus::kCompleted], 10);
  EXPECT_GT(ends[SagaStatus::kCompensated], 10);
  EXPECT_GT(pivots, 100);      // graphs with a pivot were run
  EXPECT_GT(went_forward, 0);  // and a pivot committed during a drain
  std::cout << pivots << " runs with a pivot, " << went_forward << " drains went forward\n";
}

}  // namespace
}  // namespace sagad
