// Bugs the simulator can re-introduce, one at a time (sagad-sim --bug NAME),
// to show that it finds them and in how many seeds (tests/sim/bugs_test.sh).
// Each lives in a seam the simulator owns (its store handle or its adapter),
// never in the product: it makes the engine see what a buggy store,
// classifier or transport would show it.
// - refusal-as-success: a reconciliation answer of 200 is read as "it
//   happened" whatever its body says (a stored refusal read as success).
// - timeout-as-not-sent: a request that left but got no reply is reported
//   as never sent (the classic duplicate).
// - two-owners: a renewal is answered "still yours" for a lease another
//   process took meanwhile (two owners after a pause).
// - lying-fsync: a write is reported durable but never applied (a disk
//   cache that lies), now and then.
#pragma once

#include <string>
#include <vector>

namespace sagad::sim {

enum class Bug { kNone, kRefusalAsSuccess, kTimeoutAsNotSent, kTwoOwners, kLyingFsync };

// False for an unknown name.
bool ParseBug(const std::string& name, Bug* out);
std::vector<std::string> BugNames();

}  // namespace sagad::sim
