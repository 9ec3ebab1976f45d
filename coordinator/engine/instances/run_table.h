// RunTable: what this process is doing for which instance, and nothing else
// (no threads, no I/O: the driver asks it and acts on the answer).
//
// - Drivers. At most one driver per instance at a time. Enter(id) says
//   whether the caller must start one; if one is running, it is told to go
//   round once more when it ends its round (Leave -> kAgain), so a change
//   that arrives while it plans is never missed.
// - Step actions under way. A step is marked before its STARTED record can
//   be seen (the mark is taken before that commit) and unmarked after its
//   outcome was recorded, so no other worker ever reconciles or re-sends a
//   request still in flight; at most `limit` steps of one instance at once.
//   A mark is an object (StepMark) the action holds; it is released by the
//   action, never by id and index.
// - Wake-ups. One pending wake-up per instance, the earliest asked for,
//   dropped (its timer cancelled) once the instance wants none.
// - Stopping. Once StopAndWait() began no driver starts; it returns when no
//   driver and no step action is left.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/instances/step_mark.h"
#include "util/mutex.h"

namespace sagad {

class RunTable {
 public:
  // True: no driver of `id` runs; the caller starts one (now registered).
  // False: one runs (it will go round again) or the table is stopping.
  bool Enter(const std::string& id);

  enum class After {
    kDone,     // the driver ends (unregistered)
    kAgain,    // something asked for it meanwhile: run another round now
    kRequeue,  // it yielded: post it to the back of the queue (still registered)
  };
  // The driver of `id` ended a round; `yield`: it asks to be requeued.
  After Leave(const std::string& id, bool yield);

  // Marks step `step` of `id` as under way: the mark, or an empty one if
  // the step is under way already, `limit` steps of `id` are, or the table
  // is stopping.
  StepMark TryMarkStep(const std::string& id, int step, int limit);
  // Releases `mark`, then runs `then` (what follows the step's end: plan
  // the instance again); StopAndWait waits for `then` too, so it may use the
  // engine's parts from a thread the engine does not join (an adapter's).
  void ReleaseThen(StepMark& mark, const Task& then);
  bool StepUnderWay(const std::string& id, int step) const;

  // A wake-up of `id` at wall time `due_ms` is wanted: true if the caller
  // must set a timer (no wake-up at or before `due_ms` is pending and still
  // ahead of `now_ms`), then tell its handle to WakeSet; the timer calls
  // WakeFired. `*superseded`: the handle of a later wake-up this one
  // replaces, for the caller to cancel (0: none).
  bool ClaimWake(const std::string& id, int64_t due_ms, int64_t now_ms, uint64_t* superseded);
  // The timer of the wake-up claimed at `due_ms` (kept unless it fired or
  // was replaced meanwhile; false then, and the caller cancels `handle`).
  bool WakeSet(const std::string& id, int64_t due_ms, uint64_t handle);
  void WakeFired(const std::string& id, int64_t due_ms);
  // No wake-up of `id` is wanted any more (it finished, or is not ours):
  // its entry goes, and the handle of its pending timer is answered for the
  // caller to cancel (0: none).
  uint64_t DropWake(const std::string& id);
  // Wake-ups pending (instances with a timer set).
  size_t PendingWakes() const;

  // A step action under way sent its request (true) or has its reply
  // (false): while it waits it holds no worker.
  void AwaitReply(bool waiting);
  // Drivers registered (running or queued) plus steps under way that are
  // not waiting for a reply: an upper bound of the tasks that hold or wait
  // for a worker.
  size_t Busy() const;

  bool Stopping() const;
  // Refuses new drivers, then waits until none runs and no step is under
  // way. False if the table was stopped already (nothing waited for).
  bool StopAndWait();

 private:
  friend class StepMark;
  void UnmarkStep(const std::string& id, int step);

  bool IdleLocked() const REQUIRES(mu_) {
    return running_.empty() && steps_under_way_ == 0 && ending_ == 0;
  }

  mutable Mutex mu_;
  CondVar idle_cv_;
  std::unordered_set<std::string> running_ GUARDED_BY(mu_), rerun_ GUARDED_BY(mu_);
  std::unordered_map<std::string, std::set<int>> steps_ GUARDED_BY(mu_);
  int steps_under_way_ GUARDED_BY(mu_) = 0;
  int awaiting_replies_ GUARDED_BY(mu_) = 0;  // of those, waiting for a reply
  int ending_ GUARDED_BY(mu_) = 0;            // ReleaseThen's `then` running
  struct Wake {
    int64_t due_ms = 0;
    uint64_t timer = 0;  // 0 until WakeSet
  };
  std::unordered_map<std::string, Wake> wakes_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;
};

}  // namespace sagad
