// StepRunner's admission of a send: the service's gates (pause, max_in_flight,
// max_per_second: a step held there stays PLANNED, nothing written) and, for a
// re-send, its retry budget (an empty bucket reserves the next token and
// defers the re-send, written once as retry_deferred). The contract is in
// step_runner.h.
#include <algorithm>

#include "coordinator/engine/steps/step_runner.h"

namespace sagad {

auto StepRunner::TakeRetryToken(const std::string& service) -> int64_t {
  const int64_t wait = gates_.ReserveRetry(service);
  if (wait == 0) return 0;
  metrics_.RetryBudgetExhausted(service);
  return wait;
}

auto StepRunner::DeferRetry(const ActionPtr& a, const std::string& service, int64_t wait) -> void {
  TransitionAsync(
      a->id(),
      [this, i = a->step(), service, wait](Tx& tx) {
        return tx.Note(i, StepNote::kRetryDeferred,
                       {{"service", service},
                        {"reason", "retry budget of the service is empty"},
                        {"retry_at", clock_.NowMillis() + wait}});
      },
      EndOf(a));
}

auto StepRunner::Admit(const ActionPtr& a, const std::string& service, bool resend) -> bool {
  int64_t retry_ms = 0;
  auto permit = gates_.TryAcquire(service, a->id(), a->step_def().name, &retry_ms);
  if (!permit) {
    host_.ScheduleAfter(a->id(), retry_ms);
    a->End(Next::kStop);
    return false;
  }
  a->Hold(std::move(*permit));
  if (resend) {
    int64_t wait = TakeRetryToken(service);
    if (wait > 0) {
      DeferRetry(a, service, wait);
      a->FreePermit();  // nothing is sent now: the service's slot is free
      return false;
    }
  }
  return true;
}

}  // namespace sagad
