#include "policies/deadlines.h"

#include <algorithm>

#include "policies/approval_policy.h"
#include "policies/planner.h"

namespace sagad {

void EarliestWake(int64_t due, int64_t* wake) { *wake = *wake == 0 ? due : std::min(*wake, due); }

DueDeadline NextDeadline(const SagaDefinition& def, const Instance& inst, int64_t now_ms) {
  DueDeadline out;
  const SagaStatus ss = inst.status();
  if (ss != SagaStatus::kRunning && ss != SagaStatus::kAwaitingApproval) return out;
  if (def.deadline_ms > 0 && PivotInPlay(def, inst) < 0) {
    const int64_t due = inst.created_at() + def.deadline_ms;
    if (now_ms >= due) return {DeadlineKind::kSagaDeadline, -1, 0};
    EarliestWake(due, &out.next_ms);
  }
  if (def.run && def.idle_timeout_ms > 0 && inst.Settled() && ss == SagaStatus::kRunning) {
    const int64_t due = inst.updated_at() + def.idle_timeout_ms;
    if (now_ms >= due) return {DeadlineKind::kRunIdle, -1, 0};
    EarliestWake(due, &out.next_ms);
  }
  for (size_t i = 0; i < inst.steps().size() && i < def.steps.size(); ++i) {
    const StepState& st = inst.step(i);
    if (st.status() != StepStatus::kAwaitingApproval) continue;
    const int64_t due = ApprovalDeadline(def.steps[i], st.approval_requested_at);
    if (due == 0) continue;
    if (now_ms >= due) return {DeadlineKind::kApprovalTimeout, static_cast<int>(i), 0};
    EarliestWake(due, &out.next_ms);
  }
  return out;
}

}  // namespace sagad
