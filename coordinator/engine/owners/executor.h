// Executor: where the engine's work runs. The engine never creates a thread
// or a timer itself: every driver round, step action, wake-up, heartbeat and
// retention sweep is a task handed to its Executor. Production uses shard
// threads, each an event loop with its own timers (asio_executor.h, the
// default); the simulator (coordinator/sim/) runs every task on one thread,
// in an order drawn from a seed, under simulated time, and keeps the
// owners apart all the same (a task knows whose it is).
//
// Every instance has an owner: one thread of the executor (its shard, from
// the instance id). Whatever concerns one instance (its driver rounds, its
// step actions, the continuation of its commits and of its downstream
// replies) is posted to its owner, so the instance's work runs on one
// thread, never on the store's committer or an HTTP loop.
//
// Contract:
// - Post(fn): fn runs once, soon, on some thread of the executor (never
//   inside Post), as nobody's owner (heartbeat, retention, wake-ups); it
//   may wait for the store (production: never on an owner's thread).
// - PostTo(owner, fn): the same on the thread that owns `owner`; two tasks
//   of one owner never run at once.
// - PostAfter(ms, fn) / PostAfterTo(owner, ms, fn): fn runs once, no sooner
//   than `ms` of the executor's time from now, like a Post (PostTo) then.
// - TimerTo(owner, ms, fn): as PostAfterTo, and answers a handle (never 0).
//   CancelTimer(handle) before the timer fired: fn never runs, and it (with
//   whatever it holds) is freed soon, not when its time would have come;
//   after it fired, or a second time: nothing. A wake-up that may become
//   useless (a run that finishes before its idle timeout) is a TimerTo, so
//   that nothing of a finished instance stays in memory until then.
// - OnOwner(owner): whether the calling thread runs `owner`'s tasks now
//   (the engine asserts it where an instance's work begins).
// - OwnerThreads() / OwnerThreadOf(owner): how many owner threads there
//   are, and which one (0 .. OwnerThreads()-1) runs `owner`'s tasks. State
//   kept in one slot per owner thread and touched only by that thread's
//   tasks needs no lock (envoy's thread-local slots).
// - Shutdown(): once it returns no task runs or will run: tasks still
//   queued run before it returns or never, timers not yet due never fire.
//   The engine calls it after its drivers ended (Engine::Stop).
// Thread-safety: Post, PostTo, PostAfter and PostAfterTo may be called
// from any thread, including from inside a task; TimerTo(owner) and
// CancelTimer only on the owner's thread (an instance's wake-up is its
// driver's), so that a timer is its owner's without a lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "coordinator/engine/callbacks.h"

namespace sagad {

class Executor {
 public:
  virtual ~Executor() = default;
  virtual void Post(Task fn) = 0;
  virtual void PostTo(const std::string& owner, Task fn) = 0;
  virtual void PostAfter(int64_t delay_ms, Task fn) = 0;
  virtual void PostAfterTo(const std::string& owner, int64_t delay_ms, Task fn) = 0;
  virtual uint64_t TimerTo(const std::string& owner, int64_t delay_ms, Task fn) = 0;
  virtual void CancelTimer(uint64_t handle) = 0;
  // Timers set by TimerTo that neither fired nor were cancelled (a gauge).
  virtual size_t PendingTimers() const = 0;
  virtual bool OnOwner(const std::string& owner) const = 0;
  virtual size_t OwnerThreads() const = 0;
  virtual size_t OwnerThreadOf(const std::string& owner) const = 0;
  virtual void Shutdown() = 0;
};

}  // namespace sagad
