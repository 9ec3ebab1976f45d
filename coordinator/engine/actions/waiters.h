// Waiters: callers waiting for an instance to settle (terminal, or waiting
// for a human) without holding a thread while they wait (WaitAsync: the
// API's long polls, the MCP server's calls, the tests).
//
// An asynchronous waiter may name its own condition (`Until`: a call
// decided, not merely waiting for an operator); by default it waits for
// the instance to settle. Every commit of an instance with waiters hands
// them its snapshot (Notify): each whose condition now holds is answered. Another process sharing
// the store may commit it too, so every waiter also reads the store every 200 ms; a waiter whose
// time is up gets the instance as it is.
//
// No `done` runs under the lock of the waiters' table: it is taken out of
// the table under the lock and called after (Notify runs on the thread that
// completed a commit, the store's committer: a `done` that did anything
// under the table's lock would hold every other waiter, and every commit,
// behind it). `done` must not block.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/owners/executor.h"
#include "coordinator/store/store.h"
#include "sagas/instance.h"
#include "util/mutex.h"

namespace sagad {

class Waiters {
 public:
  using Done = Completion<StatusOr<nlohmann::json>>;
  // What an asynchronous waiter waits for, judged on the instance's view;
  // empty: Settled.
  using Until = std::function<bool(const nlohmann::json&)>;
  // Makes the snapshot a commit wrote, only when a waiter needs it.
  using Snapshot = std::function<std::shared_ptr<const nlohmann::json>()>;
  // The part of an instance a waiter wants for its answer and its `until`
  // (a run's one call): made from the instance itself, so that no view of
  // the whole instance is built for it.
  using Shape = std::function<nlohmann::json(const Instance&)>;

  // The store reads of waiters are tasks on `executor`; their deadlines
  // are on `clock` (the simulator's time, in the simulator).
  Waiters(Store& store, Executor& executor, const Clock& clock);
  ~Waiters();

  // Calls `done` once, from some thread (possibly before this returns),
  // with the instance's view once it settles or `timeout` passes (NotFound:
  // no such instance); unless CancelAll comes first, or the returned
  // function (which drops this wait: true when `done` never will run; false
  // when it was already taken to run: it runs or has run). Call it only
  // while the Waiters exist. With `until`, waits for that instead of
  // Settled. The first look is at `now` (the instance as this process
  // knows it: the engine's copy); without it, at the store, read on the
  // executor's housekeeping (never on the caller's thread, which may be an
  // owner). With `shape`, what this process knows of the instance (`now`,
  // each commit's instance) is judged and answered in that shape: `until`
  // on the shape, else Instance::Settled; what the store says (another
  // process's commit) is judged and answered whole, as without.
  CancelWait WaitAsync(const std::string& id, std::chrono::milliseconds timeout, Done done,
                       Until until = nullptr, std::shared_ptr<const Instance> now = nullptr,
                       Shape shape = nullptr);
  // Answers every asynchronous waiter with `why` now, and every later one at
  // once (a draining server: its long polls get a 503, not a dropped line).
  void FinishAll(const Status& why);
  // A commit of `id` (`settled`: it left the instance settled, `inst`):
  // wake the waiters whose condition holds with the snapshot it wrote, or
  // their shape of `inst`. Cheap when `id` has no waiter: `snapshot` is
  // called only when one needs it.
  void Notify(const std::string& id, bool settled, const Snapshot& snapshot,
              const Instance* inst = nullptr);
  // Drops every asynchronous waiter without calling it, and every later
  // one. When it returns no `done` runs or will run (it waits for those
  // already taken to run).
  void CancelAll();

  // True when the instance needs nothing more from the engine right now.
  static bool Settled(const nlohmann::json& view);
  // True when no operator's or the engine's decision is still to come:
  // an instance finished or in review; a run whose every call is
  // COMMITTED, FAILED, REJECTED, CANCELLED, COMPENSATED or NEEDS_REVIEW
  // (not PLANNED, STARTED, UNKNOWN nor AWAITING_APPROVAL). `?until=decided`.
  static bool Decided(const nlohmann::json& view);
  // Decided for the one call `call_id` of a run: its status is one of
  // those, or the run has ended or is in review.
  static Until CallDecided(const std::string& call_id);

 private:
  struct Async;
  static bool Holds(const Async& w, const nlohmann::json& view);
  // Judges `w` on the instance itself (a shaped waiter, or one with no
  // `until`): its answer in `*answer` when it holds.
  static bool HoldsOn(const Async& w, const Instance& inst, nlohmann::json* answer);
  void Finish(const std::shared_ptr<Async>& w, StatusOr<nlohmann::json> j);
  bool Drop(const std::shared_ptr<Async>& w);
  Done TakeLocked(const std::shared_ptr<Async>& w) REQUIRES(mu_);
  // A look at the store for `w` after `delay_ms` (soon when 0), then
  // again every 200 ms until it holds or the deadline.
  void Arm(const std::shared_ptr<Async>& w, int64_t delay_ms);
  void Arm(const std::shared_ptr<Async>& w);

  Store& store_;
  Executor& executor_;
  const Clock& clock_;
  Mutex mu_;
  bool cancelled_ GUARDED_BY(mu_) = false;
  int running_ GUARDED_BY(mu_) = 0;  // `done`s taken and not yet returned
  CondVar idle_cv_;                  // running_ fell to 0
  Status closing_ GUARDED_BY(mu_);   // not ok once FinishAll ran
  std::unordered_multimap<std::string, std::shared_ptr<Async>> async_ GUARDED_BY(mu_);
};

}  // namespace sagad
