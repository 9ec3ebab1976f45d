// GuardGate: what a toolbox's guards (sagas/guards.h) need of the engine.
//
// A guard per run is judged inside the call's own transition (the run's
// calls are in the instance). A guard per principal counts the calls of
// every stored run the principal opened with that toolbox: PrincipalCalls
// reads them from the store, and the gate runs the appends of one
// (toolbox, principal) one at a time, each from its read to its commit, so
// two calls racing for the last unit of a guard never both pass in this
// process; AgentRuns also holds the store's shared lock (Store::LockShared:
// a PostgreSQL advisory lock) over the same span, so neither do two
// coordinators sharing a PostgreSQL store. (Two coordinators sharing one
// LMDB data dir do not lock together: docs/agents.md says so.)
//
// Each key's queue belongs to an owner of the executor (the key, prefixed
// "guard\n"): only that owner's thread touches it, in a map of that
// thread's, without a lock. Every append itself is posted to the
// executor's housekeeping (Post: it reads the store and takes the store's
// lock, which neither an owner nor the thread that completed the commit
// before it may do).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "coordinator/engine/owners/executor.h"
#include "coordinator/store/store.h"
#include "sagas/guards.h"

namespace sagad {

// The most runs of one principal and toolbox a guard reads; beyond it a
// guarded call is refused (the count would not be complete).
constexpr size_t kMaxGuardedRuns = 10000;

// The calls of `principal`'s stored runs of `toolbox`, but run `except`'s.
// ResourceExhausted past kMaxGuardedRuns runs.
StatusOr<std::vector<GuardedCall>> PrincipalCalls(Store& store, const std::string& toolbox,
                                                  const std::string& principal,
                                                  const std::string& except);

class GuardGate {
 public:
  explicit GuardGate(Executor& executor) : executor_(executor), queues_(executor.OwnerThreads()) {}
  // Runs `fn` (on the housekeeping) once every earlier `fn` of `key` has
  // called its `release` (soon when none waits); `fn` must call `release`
  // exactly once, from any thread.
  void Run(const std::string& key, std::function<void(Task release)> fn);

 private:
  using Queue = std::deque<std::function<void(Task)>>;
  using Queues = std::map<std::string, Queue>;
  static std::string OwnerOf(const std::string& key) { return "guard\n" + key; }
  // On the key's owner: the queues of that owner's thread.
  Queues& QueuesOf(const std::string& key);
  // On the key's owner: hands its first waiting `fn` to the housekeeping.
  void Start(const std::string& key);

  Executor& executor_;
  // One map per owner thread, touched only by that thread's tasks.
  std::vector<Queues> queues_;
};

}  // namespace sagad
