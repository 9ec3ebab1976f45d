// Receipt: what was decided in an instance, and by whom, as a hash chain
// an auditor checks offline (docs/agents.md, "Receipts").
//
// Built from the instance's log: the opening (its input and metadata), each
// decision of a run, each call or step that asked for an operator, each
// approval or rejection (who, when, the request's digest, the definition's
// version, the rule that asked), each outcome (committed, failed, undone)
// and the end. Each entry carries "prev", the hash of the one before (64
// zeros for the first), and "hash": SHA-256 of prev, a newline and the
// entry's canonical JSON without "hash". The receipt's own fields
// (instance_id, kind, name, version) repeat the first entry's, and "head"
// is the last hash: a change to any value is found.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sagas/instance.h"
#include "util/status.h"

namespace sagad {

// The receipt of the instance whose log is `events` (its first event the
// creation).
nlohmann::json BuildReceipt(const std::vector<Event>& events);

// Ok when `receipt` is intact; else InvalidArgument naming the first entry
// (or field) that does not hold. *entries: how many entries it checked.
Status VerifyReceipt(const nlohmann::json& receipt, size_t* entries);

}  // namespace sagad
