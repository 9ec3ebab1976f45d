// The lease rule every store applies when a lease is asked for (Store::
// AcquireLease): free, expired, already the caller's, or held by a dead
// predecessor (an owner name starting with `successor_of`) -> the caller's
// until now + ttl, the generation one higher when the owner changes;
// otherwise LeaseLost. LMDB and the MemoryStore call it inside their
// write; PostgreSQL states the same rule in SQL (postgres_schema.sql).
#pragma once

#include <string>

#include "coordinator/store/store.h"

namespace sagad {

// `held`: the stored lease of `id` (owner empty: none).
StatusOr<Lease> TakeLeaseRule(const std::string& id, Lease held, const std::string& owner,
                              int64_t now_ms, int64_t ttl_ms, const std::string& successor_of);

}  // namespace sagad
