// InstanceRepository: the instances of one store as this process sees them.
//
// Load() replays an instance from its event log (the log is the truth; the
// stored snapshot is only compared with it) and keeps it cached while it is
// unfinished. A cached instance is never changed in place: a reader holds a
// consistent copy however long it keeps it.
//
// Mutate() is the only way an instance changes: the transition function adds
// events to a copy (each checked by the state machines as it is applied);
// the copy, its events, operation records and outbox messages are committed
// in one durable write, with compare-and-swap on the instance's version. On
// a lost race (another process, or an operator's action committed first) it
// reloads and applies the function again, up to 5 times. A transition that
// adds no event commits nothing. With a lease to fence by, a commit the store
// refuses because the lease changed hands returns kLeaseLost and drops the
// instance from the cache; a mutator that finds the instance moved on
// returns kMovedOn, which is passed back unchanged.
//
// Transitions of one instance are serialised (a striped lock); `committed`
// runs under that lock after each commit, before any other transition of
// the instance can start.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/engine/transition.h"
#include "coordinator/store/store.h"
#include "sagas/instance.h"
#include "util/clock.h"
#include "util/mutex.h"

namespace sagad {

class InstanceRepository {
 public:
  // One commit that happened.
  struct Commit {
    std::string id;
    std::shared_ptr<const Instance> instance;        // as committed
    const std::vector<Event>* events = nullptr;      // what it added
    std::shared_ptr<const nlohmann::json> snapshot;  // as stored
    std::chrono::steady_clock::duration took{};      // the store's commit
  };
  struct Hooks {
    // The outbox messages a transition publishes (in the same commit).
    std::function<std::vector<nlohmann::json>(const Instance&, const std::vector<Event>&)> outbox;
    // After each commit, under the instance's lock.
    std::function<void(const Commit&)> committed;
    // Every store commit attempt, lost races included.
    std::function<void(std::chrono::steady_clock::duration)> attempted;
    // A line for the log (a replay, a snapshot that disagrees with its log).
    std::function<void(nlohmann::json)> log;
  };

  InstanceRepository(Store& store, const Clock& clock, Hooks hooks);

  // The instance as last committed. NotFound if there is none.
  StatusOr<std::shared_ptr<const Instance>> Load(const std::string& id);
  // The same for a reader (the API's views): the cached copy, else the
  // store's, which is not cached. Only those who act on an instance fill
  // the cache, so a cached version that differs from the store's still
  // means "changed elsewhere, plan it again" to the heartbeat; a read that
  // cached it would hide that change (found by the simulator: an operator
  // commit applied but reported failed, then a read, left an instance
  // COMPENSATING with no driver).
  StatusOr<std::shared_ptr<const Instance>> Peek(const std::string& id);
  // The version of the cached copy, 0 if none is cached (no store access).
  uint64_t CachedVersion(const std::string& id);
  // Drops the cached copy: the next Load reads the store.
  void Evict(const std::string& id);

  // Creates an instance (version 1) from its first events (`created` and
  // what rode with it: the transition `tx` applied to `inst` after it), with
  // the submission record and first lease when given, in one durable write;
  // then `committed` runs as after any commit. `tx` may be null.
  Status Create(const Instance& inst, const Event& created, Tx* tx, const Submission* submission,
                const Lease* lease);

  // See above. `fence`: the lease the commit must still hold (null for an
  // operator's action, which makes no downstream call).
  Status Mutate(const std::string& id, const std::function<Status(Tx&)>& fn, const Lease* fence);

  Store& store() { return store_; }

 private:
  // A stripe is held across the store's commit (its fsync): two instances
  // sharing one wait a whole group commit for each other. With 64 stripes
  // and 64 sagas in flight most commits met another instance's (a profile
  // at concurrency 64: 9 % of sagad's context switches were these waits);
  // with 4096 a collision is rare (a mutex is 40 bytes: 160 KiB).
  static constexpr size_t kStripes = 4096;
  Mutex& stripe(const std::string& id);
  void CachePut(const std::string& id, std::shared_ptr<const Instance> inst);
  // REQUIRES: stripe(id) held.
  // `keep`: a copy read from the store is cached (false for Peek).
  StatusOr<std::shared_ptr<const Instance>> LoadLocked(const std::string& id, bool keep = true);

  Store& store_;
  const Clock& clock_;
  Hooks hooks_;
  Mutex stripes_[kStripes];
  Mutex cache_mu_;
  // The stripes guard no member: each serialises one instance's
  // transitions (a lock on a key, which the analysis cannot name).
  std::unordered_map<std::string, std::shared_ptr<const Instance>> cache_ GUARDED_BY(cache_mu_);
};

}  // namespace sagad
