// AsioExecutor: the production Executor (executor.h): `threads` shard
// threads, each a Boost.Asio event loop of its own that runs its tasks one
// at a time; an owner's tasks go to the shard its id hashes to; the tasks
// nobody owns (Post, PostAfter: heartbeats, retention, waiters' looks at the
// store, guards' locks; sagad's API handlers too) to `house_threads`
// housekeeping threads ("sagad-house-N"), which may wait for the store, so
// that an owner never does for them (as envoy's main thread beside its
// workers). Each shard's loop keeps its own
// timers, without a lock: only its thread arms, fires or cancels them (an
// owner's timer runs its task there); nobody's timers are the housekeeping
// loop's, so that the leases' heartbeat never waits behind a shard's
// backlog. A shard thread is an
// engine worker: it must not wait for a commit or a downstream call
// (util/thread_role.h).
// Thread-safety: as Executor's; TimerTo and CancelTimer on the owner's
// thread (checked). The destructor waits for the posts that began before it
// (a committer may still be returning from the post of a task that has
// run); a post that begins after it is a caller's bug.
#pragma once

#include <memory>

#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/owners/executor.h"

namespace sagad {

class AsioExecutor final : public Executor {
 public:
  explicit AsioExecutor(int threads, int housekeepers = 2);
  ~AsioExecutor() override;

  void Post(Task fn) override;
  void PostTo(const std::string& owner, Task fn) override;
  void PostAfter(int64_t delay_ms, Task fn) override;
  void PostAfterTo(const std::string& owner, int64_t delay_ms, Task fn) override;
  uint64_t TimerTo(const std::string& owner, int64_t delay_ms, Task fn) override;
  void CancelTimer(uint64_t handle) override;
  size_t PendingTimers() const override;
  bool OnOwner(const std::string& owner) const override;
  size_t OwnerThreads() const override;
  size_t OwnerThreadOf(const std::string& owner) const override;
  void Shutdown() override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sagad
