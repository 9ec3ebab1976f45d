// What an operator may do to an instance now: one rule per action, decided
// from the instance and its definition alone (no store, no clock).
//
// The same rules serve twice: OperatorActions asks them before it changes an
// instance, and the instance view lists them (`actions`, AllowedActions
// below) so that the console offers exactly what the server would accept.
//
// Each rule returns Ok when the action would change the instance, or
// FailedPrecondition with the reason an operator needs. A repeat of an
// action that already took effect (approving an approved step, cancelling a
// saga already turning back) is accepted by OperatorActions as a no-op
// before it asks the rule; the rule says no to it, so it is not offered.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

#include "sagas/definition.h"
#include "sagas/instance.h"
#include "util/status.h"

namespace sagad {

Status MayApprove(const Instance& inst, int step);
Status MayReject(const Instance& inst, int step);
// Refused once the saga ended, in NEEDS_REVIEW, while it already turns back,
// and once an irreversible step may have taken effect.
Status MayCancel(const SagaDefinition& def, const Instance& inst);
// A step waiting on a retry timer, or whose retries ran out and sent the
// saga to review.
Status MayRetry(const Instance& inst, int step);
// A step not yet sent, or whose forward outcome is under review.
Status MaySkip(const Instance& inst, int step);
// Only in NEEDS_REVIEW, before the pivot, with no step of unknown outcome.
Status MayForceCompensate(const SagaDefinition& def, const Instance& inst);
// In NEEDS_REVIEW, a step of unknown outcome; `in_flight`: a request for it
// is under way on this coordinator (its outcome will be recorded).
Status MayResolve(const Instance& inst, int step, bool in_flight);

// Every rule for the instance as JSON, each {"allowed": bool, "reason"?}:
//   {"cancel": ..., "compensate": ...,
//    "steps": {"<step>": {"approve", "reject", "retry", "skip", "resolve"}}}
// `def` null (a version no longer registered) allows no approve, cancel or
// compensate: those need the definition.
nlohmann::json AllowedActions(const SagaDefinition* def, const Instance& inst,
                              const std::function<bool(int)>& in_flight);

}  // namespace sagad
