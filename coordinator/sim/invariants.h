// What the simulator checks at the end of a seed, over the store and the
// downstreams' ground truth (the downstreams check at each effect that no
// operation takes effect twice at a service that does not deduplicate and
// that no undo comes before its forward effect; SimAdapter checks that no
// request leaves without a live lease):
// - liveness: every instance ended COMPLETED, COMPENSATED, or NEEDS_REVIEW
//   with a reason;
// - the snapshot equals the replay of the event log;
// - a step COMMITTED has its effect (unless an operator resolved or
//   skipped it); a step recorded as never done (PLANNED, FAILED, REJECTED)
//   has none; a COMPLETED saga has every effect, a COMPENSATED one has
//   every compensable effect undone;
// - never COMPENSATED with an irreversible step that took effect;
// - undo in dependency order: a step is undone only after every step that
//   depends on it and took effect was undone;
// - at most one instance per client Idempotency-Key;
// - no guard of the agents' toolbox exceeded (per run, per principal).
// (The agents check as they go that a decision, once answered, never
// changes; ApiClient that every request, a wait until decided included, is
// answered within its bound.)
#pragma once

#include <set>
#include <string>

#include "coordinator/sim/world.h"

namespace sagad::sim {

// The first violation found ("" if none).
std::string CheckEnd(World& world, const std::set<std::string>& keys);

}  // namespace sagad::sim
