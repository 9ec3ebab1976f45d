// Waiters: callers waiting for an instance to settle (terminal, or waiting
// for a human), either blocking a thread (Wait) or not (WaitAsync: the API's
// long polls, which must hold no thread while they wait).
//
// The commit that settles an instance hands its snapshot to that instance's
// waiters (Notify). Another process sharing the store may commit it too, so
// every waiter also reads the store every 200 ms; a waiter whose time is up
// gets the instance as it is.
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
#include "util/mutex.h"

namespace sagad {

class Waiters {
 public:
  using Done = Completion<StatusOr<nlohmann::json>>;

  // The store reads of asynchronous waiters are tasks on `executor`.
  Waiters(Store& store, Executor& executor);
  ~Waiters();

  // Blocks until the instance settles or `timeout` passes; its view then.
  StatusOr<nlohmann::json> Wait(const std::string& id, std::chrono::milliseconds timeout);
  // Calls `done` once, from some thread (possibly before this returns), as
  // Wait would return; unless CancelAll comes first, or the returned
  // function (which drops this wait: true when `done` never will run; false
  // when it was already taken to run: it runs or has run). Call it only
  // while the Waiters exist.
  CancelWait WaitAsync(const std::string& id, std::chrono::milliseconds timeout, Done done);
  // Answers every asynchronous waiter with `why` now, and every later one at
  // once (a draining server: its long polls get a 503, not a dropped line).
  void FinishAll(const Status& why);
  // A commit settled `id`: wake its waiters with the snapshot it wrote.
  void Notify(const std::string& id, const std::shared_ptr<const nlohmann::json>& snapshot);
  // Drops every asynchronous waiter without calling it, and every later
  // one. When it returns no `done` runs or will run (it waits for those
  // already taken to run).
  void CancelAll();

  // True when the instance needs nothing more from the engine right now.
  static bool Settled(const nlohmann::json& view);

 private:
  struct Blocking;
  struct Async;
  void Finish(const std::shared_ptr<Async>& w, StatusOr<nlohmann::json> j);
  bool Drop(const std::shared_ptr<Async>& w);
  Done TakeLocked(const std::shared_ptr<Async>& w) REQUIRES(mu_);
  void Arm(const std::shared_ptr<Async>& w);

  Store& store_;
  Executor& executor_;
  Mutex mu_;
  bool cancelled_ GUARDED_BY(mu_) = false;
  int running_ GUARDED_BY(mu_) = 0;  // `done`s taken and not yet returned
  CondVar idle_cv_;                  // running_ fell to 0
  Status closing_ GUARDED_BY(mu_);   // not ok once FinishAll ran
  std::unordered_multimap<std::string, Blocking*> blocking_ GUARDED_BY(mu_);
  std::unordered_multimap<std::string, std::shared_ptr<Async>> async_ GUARDED_BY(mu_);
};

}  // namespace sagad
