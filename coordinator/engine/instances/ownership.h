// Ownership: which instances this process drives, by lease (store.h's
// Lease). A process drives an instance only while it holds the instance's
// lease; every downstream call carries the lease's generation as its fencing
// token, and every driver commit is fenced by it in the store.
//
// A lease is taken in the store when it is free, expired, or held by a dead
// predecessor of the same coordinator id (a restart takes its own leases at
// once instead of waiting out their TTL). Renew() extends every lease held,
// and reports those another process took meanwhile. Release() forgets one
// (the instance finished, or a fenced commit showed it is gone).
//
// The lease rule of sends: a request of an instance leaves only while this
// process holds its lease with at least lease_ms/3 left by this process's
// clock (ReadyToSend). What this process believes of its own lease is
// counted from a time read before the store transaction that granted or
// renewed it, so it never outlives the lease as stored (whose time base is
// read inside that transaction); a pause or a slow store shortens it, never
// lengthens it. A request that waits for a connection of its service (the
// adapter's line, max_connections) is checked again when it leaves the
// line, right before its first byte is written (SendableNow: no renewal,
// which would be a store transaction on the adapter's loop): one whose
// lease ran low meanwhile is withheld. What remains: a pause between that
// check and the write of the request on the socket. Only a downstream that
// refuses a Saga-Fencing-Token lower than one it has seen closes that window.
//
// Ownership knows nothing of instances: whoever takes a lease with a new
// generation (Acquire returns kTaken) must reload the instance before acting.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/store/store.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/random.h"

namespace sagad {

class Ownership {
 public:
  // `owner` names this process in the store: coordinator_id + "/" + a
  // random incarnation (drawn from `random`), so that a restart is
  // recognisably a successor.
  Ownership(Store& store, const Clock& clock, const std::string& coordinator_id, int64_t lease_ms,
            Random& random = SystemRandom::Shared());

  const std::string& owner() const { return owner_; }
  int64_t lease_ms() const { return lease_ms_; }

  // The lease held on `id`, if any (no store access).
  std::optional<Lease> Held(const std::string& id) const;
  // The fencing token sent downstream: the generation held, else 0.
  uint64_t Token(const std::string& id) const;

  enum class Take { kAlreadyHeld, kTaken, kRefused };
  // Takes the lease of `id` unless it is held already. kRefused: another
  // live process holds it (or the store could not be asked).
  Take Acquire(const std::string& id);
  // Start-up: every lease among `ids` that is free or a predecessor's, in
  // one store transaction. Returns how many were taken.
  size_t AcquireAll(const std::vector<std::string>& ids);
  // Records a lease written by someone else on this process's behalf.
  void Adopt(const std::string& id, const Lease& lease);
  // The first lease of an instance this process created, written with its
  // creation: recorded unless a later one is held already. The creation's
  // continuation may run after the first lease ran out, another process
  // took the instance and this one took it back (found by the simulator: a
  // paused process, its creation committed; Adopt aborted on the
  // generation going down).
  void AdoptFirst(const std::string& id, const Lease& first);
  // The lease the creation of a new instance writes: this owner, generation 1.
  Lease FirstLease() const;
  // Forgets `id` (no store access: a finished instance's lease is released
  // by its terminal commit; a fenced one belongs to someone else already).
  void Release(const std::string& id);
  // Ok if a request of `id` may be sent now: its lease is held with at
  // least lease_ms/3 left, renewed first (one store transaction) if less
  // is left. LeaseLost if another process holds
  // it now (it is forgotten here); Unavailable if it could not be renewed
  // in time (the store failed or took too long). Never send otherwise.
  Status ReadyToSend(const std::string& id);
  // Ok if the lease of `id` is held with at least lease_ms/3 left now,
  // without renewing it (no store access: for the adapter's thread, right
  // before a request that waited in line is written). LeaseLost otherwise.
  Status SendableNow(const std::string& id) const;
  // Renews every lease held, in one store transaction; forgets and returns
  // those held by another process now. On a store error nothing is renewed
  // or forgotten (the next round tries again) and the error is returned.
  StatusOr<std::vector<std::string>> Renew();
  size_t size() const;

  // Consecutive commits of `id` the store refused under this process
  // (the driver's back-off): one more, and the count now. The count goes
  // with a commit that succeeds (ClearRefusedCommits) and with the lease.
  int CountRefusedCommit(const std::string& id);
  // A commit of `id` went through, or its lease went elsewhere. No lock
  // while nothing is counted (every commit calls it).
  void ClearRefusedCommits(const std::string& id);

 private:
  // Renews the leases of `ids` in one store transaction: forgets those
  // another process holds now (returned) and those released meanwhile by
  // their instance's final commit (not a loss: not returned), extends the
  // others by lease_ms from the time read before asking. On a store error
  // nothing changes.
  StatusOr<std::vector<std::string>> RenewIds(const std::vector<std::string>& ids);
  // Caps what this process believes of `lease` by `asked_at` + lease_ms
  // (asked_at: read before the store was asked).
  Lease Believed(Lease lease, int64_t asked_at) const;
  // `id`'s count of refused commits goes (with its lease, or a commit).
  void ForgetRefusalsLocked(const std::string& id) REQUIRES(mu_);

  Store& store_;
  const Clock& clock_;
  const std::string coordinator_id_;
  const std::string owner_;
  const int64_t lease_ms_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Lease> held_ GUARDED_BY(mu_);
  std::unordered_map<std::string, int> refused_ GUARDED_BY(mu_);
  std::atomic<bool> any_refused_{false};  // refused_ is not empty
};

}  // namespace sagad
