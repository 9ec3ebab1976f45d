// Driver's clocks: the deadlines of an instance (which one ran out is
// policies/deadlines.h; what it does to the instance is said here) and its
// wake-up, one timer at a time, cancelled once the instance wants none.
#include "coordinator/engine/driver/driver.h"
#include "coordinator/engine/instances/saga_turns.h"
#include "policies/deadlines.h"

namespace sagad {

auto Driver::WakeAt(const std::string& id, int64_t due_ms) -> void {
  const int64_t now = clock_.NowMillis();
  uint64_t superseded = 0;
  if (!runs_.ClaimWake(id, due_ms, now, &superseded)) return;
  if (superseded != 0) executor_.CancelTimer(superseded);
  const uint64_t timer =
      executor_.TimerTo(id, std::max<int64_t>(1, due_ms - now), [this, id, due_ms] {
        runs_.WakeFired(id, due_ms);
        Schedule(id);
      });
  if (!runs_.WakeSet(id, due_ms, timer)) executor_.CancelTimer(timer);  // fired or replaced
}

auto Driver::NoWake(const std::string& id) -> void {
  if (const uint64_t timer = runs_.DropWake(id)) executor_.CancelTimer(timer);
}

auto Driver::Deadlines(const SagaDefinition& def, const Instance& inst, int64_t* wake_at)
    -> Mutation {
  const DueDeadline due = NextDeadline(def, inst, clock_.NowMillis());  // policies/deadlines.h
  switch (due.kind) {
    case DeadlineKind::kNone:
      *wake_at = due.next_ms;
      return nullptr;
    case DeadlineKind::kSagaDeadline:
      return [ms = def.deadline_ms](Tx& tx) -> Status {
        SAGAD_RETURN_IF_ERROR(tx.RejectAwaitingApprovals("sagad", "saga deadline passed"));
        return tx.Saga(SagaEvent::kStartCompensation,
                       {{"reason", "saga deadline of " + std::to_string(ms) + " ms passed"}});
      };
    case DeadlineKind::kRunIdle:
      return IdleRun(def, inst);  // saga_turns.h
    case DeadlineKind::kApprovalTimeout:
      break;
  }
  const int i = due.step;
  const StepDefinition& sd = def.steps[i];
  std::string why = "approval of '" + sd.name + "' timed out after " +
                    std::to_string(sd.approval_timeout_ms) + " ms";
  return [i, why, step = sd.name,
          escalate = sd.approval_timeout_action == "escalate"](Tx& tx) -> Status {
    if (tx.inst().step(i).status() != StepStatus::kAwaitingApproval)
      return MovedOn("decided meanwhile");
    if (escalate) return tx.Saga(SagaEvent::kEscalate, {{"reason", why}, {"step", step}});
    SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kReject, {{"by", "sagad"}, {"reason", why}}));
    if (tx.inst().is_run())  // a run's call refused: its agent decides what next
      return tx.inst().status() == SagaStatus::kAwaitingApproval ? tx.Saga(SagaEvent::kResume)
                                                                 : Status::Ok();
    SAGAD_RETURN_IF_ERROR(tx.RejectAwaitingApprovals("sagad", "not needed: " + why));
    return tx.Saga(SagaEvent::kStartCompensation, {{"reason", why}});
  };
}

}  // namespace sagad
