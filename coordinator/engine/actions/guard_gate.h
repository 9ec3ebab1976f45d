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
// The next waiting append is posted to the executor (never run on the
// thread that completed the commit before it: a committer or an owner,
// which must not do store reads).
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
#include "util/mutex.h"

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
  explicit GuardGate(Executor& executor) : executor_(executor) {}
  // Runs `fn` once every earlier `fn` of `key` has called its `release`
  // (at once when none waits); `fn` must call `release` exactly once.
  void Run(const std::string& key, std::function<void(Task release)> fn);

 private:
  void Next(const std::string& key);

  Executor& executor_;
  Mutex mu_;
  std::map<std::string, std::deque<std::function<void(Task)>>> queues_ GUARDED_BY(mu_);
};

}  // namespace sagad
