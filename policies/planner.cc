#include "policies/planner.h"

#include <algorithm>

#include "policies/approval_policy.h"
#include "sagas/ancestors.h"
#include "util/check.h"

namespace sagad {
namespace {

bool InDoubt(StepStatus s) { return s == StepStatus::kStarted || s == StepStatus::kUnknown; }

bool ReviewingUndo(const StepState& st) {
  return st.status() == StepStatus::kNeedsReview && st.machine.reviewing_compensation();
}

// A committed step with something to undo: it has a compensation and was
// not skipped by an operator before it was ever sent (a step never sent
// took no effect: it is never undone).
bool Undoable(const SagaDefinition& def, const StepState& st, int i) {
  if (!def.steps[i].compensation) return false;
  const bool skipped_unsent = st.attempts == 0 && st.resolution.is_object() &&
                              st.resolution.value("outcome", "") == "skipped";
  return !skipped_unsent;
}

// A run's calls go one at a time, in the order appended: the first one not
// settled is the only one planned. A failed or rejected call does not turn
// the run back (its agent decides what comes next), and a run with nothing
// to do waits for its agent: only finish completes it.
std::vector<Action> RunForward(const SagaDefinition& def, const Instance& inst) {
  const int n = static_cast<int>(inst.steps().size());
  for (int i = 0; i < n; ++i) {
    const StepState& st = inst.step(i);
    switch (st.status()) {
      case StepStatus::kCommitted:
      case StepStatus::kFailed:
      case StepStatus::kRejected:
        continue;
      case StepStatus::kStarted:
      case StepStatus::kUnknown:
        return {{ActionKind::kReconcile, i}};
      case StepStatus::kNeedsReview:
        return {{ActionKind::kEscalate, i}};
      case StepStatus::kAwaitingApproval:
        return {{ActionKind::kAwaitApproval, -1}};
      case StepStatus::kPlanned:
        if (NeedsApproval(def.steps[i], inst.input()) && !st.machine.approved())
          return {{ActionKind::kRequestApproval, i}};
        return {{ActionKind::kExecute, i}};
      default:
        return {{ActionKind::kNone, i}};
    }
  }
  return {{ActionKind::kNone, -1}};
}

std::vector<Action> Forward(const SagaDefinition& def, const Instance& inst) {
  if (def.run) return RunForward(def, inst);
  const int n = static_cast<int>(inst.steps().size());
  std::vector<Action> out;
  for (int i = 0; i < n; ++i) {
    StepStatus s = inst.step(i).status();
    if (s == StepStatus::kFailed || s == StepStatus::kRejected)
      return {{ActionKind::kStartCompensation, i}};
  }
  int active = 0;
  for (int i = 0; i < n; ++i)
    if (InDoubt(inst.step(i).status())) {
      out.push_back({ActionKind::kReconcile, i});
      ++active;
    }
  bool review = false, approval = false, all_committed = true;
  for (int i = 0; i < n; ++i) {
    const StepState& st = inst.step(i);
    StepStatus s = st.status();
    all_committed = all_committed && s == StepStatus::kCommitted;
    review = review || s == StepStatus::kNeedsReview;
    approval = approval || s == StepStatus::kAwaitingApproval;
    if (s != StepStatus::kPlanned) continue;
    bool ready = true;
    for (int d : st.after) ready = ready && inst.step(d).status() == StepStatus::kCommitted;
    if (!ready) continue;
    if (NeedsApproval(def.steps[i], inst.input()) && !st.machine.approved()) {
      out.push_back({ActionKind::kRequestApproval, i});
    } else if (active < def.max_parallel) {
      out.push_back({ActionKind::kExecute, i});
      ++active;
    }
  }
  if (!out.empty()) {
    // Forward steps in index order (reconciliations were listed first).
    std::stable_sort(out.begin(), out.end(),
                     [](const Action& a, const Action& b) { return a.step < b.step; });
    return out;
  }
  if (review) {
    for (int i = 0; i < n; ++i)
      if (inst.step(i).status() == StepStatus::kNeedsReview) return {{ActionKind::kEscalate, i}};
  }
  if (approval) return {{ActionKind::kAwaitApproval, -1}};
  if (all_committed) return {{ActionKind::kComplete, -1}};
  return {{ActionKind::kNone, -1}};
}

std::vector<Action> Backward(const SagaDefinition& def, const Instance& inst) {
  const int n = static_cast<int>(inst.steps().size());
  std::vector<Action> out;
  // Drain: nothing is undone while a forward outcome is open.
  for (int i = n - 1; i >= 0; --i)
    if (InDoubt(inst.step(i).status())) out.push_back({ActionKind::kReconcile, i});
  if (!out.empty()) return out;
  // An irreversible step committed while turning back (it was in flight
  // when the saga turned): it can only go forward.
  for (int i = 0; i < n; ++i)
    if (def.steps[i].irreversible && inst.step(i).status() == StepStatus::kCommitted)
      return {{ActionKind::kGoForward, i}};
  // A step still to be undone (or being undone, or whose undo is in
  // review), or one whose forward outcome is in review: it may have
  // happened, so what it depends on waits for a human (found by the
  // simulator, seed 551963: an ancestor was undone first).
  auto forward_review = [&](int k) {
    const StepState& st = inst.step(k);
    return st.status() == StepStatus::kNeedsReview && !st.machine.reviewing_compensation() &&
           def.steps[k].compensation;
  };
  auto pending_undo = [&](int k) {
    const StepState& st = inst.step(k);
    StepStatus s = st.status();
    return (s == StepStatus::kCommitted && Undoable(def, st, k)) ||
           s == StepStatus::kCompensating || ReviewingUndo(st) || forward_review(k);
  };
  int active = 0;
  for (int i = n - 1; i >= 0; --i)
    if (inst.step(i).status() == StepStatus::kCompensating) {
      out.push_back({ActionKind::kReconcileCompensation, i});
      ++active;
    }
  if (def.compensation_order == CompensationOrder::kReverseCompletion) {
    // One at a time, last committed first; one in review holds up the rest.
    int64_t blocked_below = 0;
    for (int i = 0; i < n; ++i) {
      if (ReviewingUndo(inst.step(i)))
        blocked_below = std::max(blocked_below, inst.step(i).commit_seq);
      // One whose forward outcome is in review may be the last to commit.
      if (forward_review(i)) blocked_below = INT64_MAX;
    }
    int next = -1;
    for (int i = 0; i < n; ++i) {
      const StepState& st = inst.step(i);
      if (st.status() != StepStatus::kCommitted || !Undoable(def, st, i)) continue;
      if (next < 0 || st.commit_seq > inst.step(next).commit_seq) next = i;
    }
    if (active == 0 && next >= 0 && inst.step(next).commit_seq > blocked_below)
      out.push_back({ActionKind::kCompensate, next});
  } else {
    std::vector<char> blocked = AncestorsOfAny(inst.steps(), pending_undo);
    for (int i = n - 1; i >= 0 && active < def.max_parallel; --i) {
      const StepState& st = inst.step(i);
      if (st.status() != StepStatus::kCommitted || !Undoable(def, st, i)) continue;
      if (blocked[i]) continue;
      out.push_back({ActionKind::kCompensate, i});
      ++active;
    }
  }
  if (!out.empty()) return out;
  for (int i = n - 1; i >= 0; --i)
    if (inst.step(i).status() == StepStatus::kNeedsReview) return {{ActionKind::kEscalate, i}};
  for (int i = 0; i < n; ++i)
    if (pending_undo(i)) return {{ActionKind::kNone, i}};
  return {{ActionKind::kFinishCompensation, -1}};
}

const SagaDefinition& Current(const SagaDefinition& def, const Instance& inst) {
  return CurrentDefinition(def, inst);
}

}  // namespace

const SagaDefinition& CurrentDefinition(const SagaDefinition& def, const Instance& inst) {
  return def.run && inst.is_run() ? *inst.run_definition() : def;
}

const char* ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kNone:
      return "none";
    case ActionKind::kRequestApproval:
      return "request_approval";
    case ActionKind::kExecute:
      return "execute";
    case ActionKind::kReconcile:
      return "reconcile";
    case ActionKind::kStartCompensation:
      return "start_compensation";
    case ActionKind::kCompensate:
      return "compensate";
    case ActionKind::kReconcileCompensation:
      return "reconcile_compensation";
    case ActionKind::kComplete:
      return "complete";
    case ActionKind::kFinishCompensation:
      return "finish_compensation";
    case ActionKind::kAwaitApproval:
      return "await_approval";
    case ActionKind::kEscalate:
      return "escalate";
    case ActionKind::kGoForward:
      return "go_forward";
  }
  return "?";
}

bool IsStepAction(ActionKind k) {
  return k == ActionKind::kExecute || k == ActionKind::kReconcile || k == ActionKind::kCompensate ||
         k == ActionKind::kReconcileCompensation;
}

bool PivotCommitted(const SagaDefinition& given, const Instance& inst) {
  const SagaDefinition& def = Current(given, inst);
  for (size_t i = 0; i < def.steps.size(); ++i)
    if (def.steps[i].irreversible && inst.step(i).status() == StepStatus::kCommitted) return true;
  return false;
}

int PivotInPlay(const SagaDefinition& given, const Instance& inst) {
  const SagaDefinition& def = Current(given, inst);
  for (size_t i = 0; i < def.steps.size(); ++i) {
    if (!def.steps[i].irreversible) continue;
    const StepState& st = inst.step(i);
    StepStatus s = st.status();
    if (InDoubt(s) || s == StepStatus::kCommitted ||
        (s == StepStatus::kNeedsReview && !st.machine.reviewing_compensation()))
      return static_cast<int>(i);
  }
  return -1;
}

std::vector<Action> NextActions(const SagaDefinition& given, const Instance& inst) {
  const SagaDefinition& def = Current(given, inst);
  std::vector<Action> out;
  switch (inst.status()) {
    case SagaStatus::kRunning:
      out = Forward(def, inst);
      break;
    case SagaStatus::kCompensating:
      out = Backward(def, inst);
      break;
    default:
      out = {{ActionKind::kNone, -1}};
  }
  // Callers take front(): "nothing to do" is kNone, never an empty list.
  SAGAD_CHECK(!out.empty()) << "no action planned for instance " << inst.id();
  return out;
}

nlohmann::json CompensationPlan(const SagaDefinition& given, const Instance& inst) {
  const SagaDefinition& def = Current(given, inst);
  const int n = static_cast<int>(inst.steps().size());
  auto pending_undo = [&](int k) {
    const StepState& st = inst.step(k);
    StepStatus s = st.status();
    return (s == StepStatus::kCommitted && Undoable(def, st, k)) ||
           s == StepStatus::kCompensating || ReviewingUndo(st);
  };
  bool back = inst.status() == SagaStatus::kCompensating || inst.reviewing_compensation();
  // waits_for[i]: the undos still to come of the steps that ran after i, one
  // walk up the dependencies per such undo.
  std::vector<nlohmann::json> waits_for(n, nlohmann::json::array());
  for (int k = 0; k < n; ++k) {
    if (!pending_undo(k)) continue;
    std::vector<char> before = AncestorsOfAny(inst.steps(), [k](int b) { return b == k; });
    for (int i = 0; i < n; ++i)
      if (before[i]) waits_for[i].push_back(inst.step(k).name);
  }
  nlohmann::json out = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    const StepState& st = inst.step(i);
    StepStatus s = st.status();
    if (st.commit_seq == 0 && s != StepStatus::kCompensating && s != StepStatus::kCompensated &&
        !ReviewingUndo(st))
      continue;  // never committed: nothing to undo
    const nlohmann::json& waits = waits_for[i];
    std::string state;
    if (s == StepStatus::kCompensated)
      state = "done";
    else if (s == StepStatus::kCompensating)
      state = "in_progress";
    else if (ReviewingUndo(st))
      state = "needs_review";
    else if (!Undoable(def, st, i))
      state = "none";
    else if (!back)
      state = "not_started";
    else
      state = waits.empty() ? "ready" : "waiting";
    nlohmann::json j = {{"step", st.name}, {"status", state}, {"commit_seq", st.commit_seq}};
    if (state == "waiting") j["waits_for"] = waits;
    out.push_back(std::move(j));
  }
  return out;
}

Action NextAction(const SagaDefinition& def, const Instance& inst) {
  return NextActions(def, inst).front();
}

}  // namespace sagad
