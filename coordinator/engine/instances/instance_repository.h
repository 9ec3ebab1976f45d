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
// MutateAsync is the same without blocking its caller on the commit: the
// store's CommitAsync completes it. What follows the commit (the
// `committed` hook, a reload after a lost race, `done`) is handed to the
// instance's owner (`owners`): it never runs on the store's committer.
//
// Transitions of one instance are serialised (InstanceTurns: a turn per
// instance, held from the load to the end of the commit, for blocking and
// asynchronous transitions alike); `committed` runs in that turn after each
// commit, before any other transition of the instance can start. Load and
// Peek never wait for a turn: while one is held they answer the copy last
// committed (a thread that waited there would wait for a commit).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/instances/instance_turns.h"
#include "coordinator/engine/instances/transition.h"
#include "coordinator/engine/owners/executor.h"
#include "coordinator/store/store.h"
#include "sagas/instance.h"
#include "util/clock.h"
#include "util/in_flight.h"
#include "util/log.h"
#include "util/mutex.h"

namespace sagad {

class InstanceRepository {
 public:
  // One commit that happened.
  struct Commit {
    std::string id;
    std::shared_ptr<const Instance> instance;    // as committed
    const std::vector<Event>* events = nullptr;  // what it added
    // As stored; null after MutateAsync (its snapshot is text: see
    // `instance`, whose ToJson() it is).
    std::shared_ptr<const nlohmann::json> snapshot;
    std::chrono::steady_clock::duration took{};  // the store's commit
  };
  // What the engine learns from the repository. Each method has a default
  // that does nothing (tests listen to what they check).
  class Listener {
   public:
    virtual ~Listener() = default;
    // The outbox messages a transition publishes (in the same commit).
    virtual std::vector<nlohmann::json> OutboxMessages(const Instance& inst,
                                                       const std::vector<Event>& events);
    // After each commit, in the instance's turn.
    virtual void Committed(const Commit& c);
    // Every store commit attempt, lost races included.
    virtual void CommitAttempted(std::chrono::steady_clock::duration took);
    // A line for the log (a replay, a snapshot that disagrees with its log).
    virtual void Log(LogLevel level, nlohmann::json line);
  };

  // `listener`: null listens to nothing. `owners`: where what follows an
  // asynchronous commit runs (Executor::PostTo the instance's owner), off
  // the thread that completed the commit (the store's); null runs it there
  // (tests). Both outlive the repository.
  InstanceRepository(Store& store, const Clock& clock, Listener* listener = nullptr,
                     Executor* owners = nullptr);
  // Waits for the hand-offs of MutateAsync still under way (WaitIdle).
  ~InstanceRepository() { WaitIdle(); }

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
  // The cached copy, null if none is cached (no store access).
  std::shared_ptr<const Instance> CachedCopy(const std::string& id);
  // Drops the cached copy: the next Load reads the store.
  void Evict(const std::string& id);
  // Instances cached now (a gauge).
  size_t Cached();

  // Creates an instance (version 1) from its first events (the creation
  // and what rode with it) and their operation records, with the
  // submission record and first lease when given, in one durable write;
  // then `committed` runs as after any commit.
  Status Create(const Instance& inst, const std::vector<Event>& events,
                const std::vector<OperationRecord>& ops, const Submission* submission,
                const Lease* lease);
  // Create, completing `done` on the instance's owner (`owners`)
  // instead of blocking its caller on the commit.
  void CreateAsync(const Instance& inst, const std::vector<Event>& events,
                   const std::vector<OperationRecord>& ops, const Submission* submission,
                   const Lease* lease, Completion<Status> done);

  // See above. `fence`: the lease the commit must still hold (null for an
  // operator's action, which makes no downstream call).
  Status Mutate(const std::string& id, const Mutation& fn, const Lease* fence);
  // Mutate, completing `done` with what Mutate would return. `fn` runs in
  // the instance's turn: inside this call when the turn is free, else when
  // the transition before it ends; again (on the owner) after a lost race.
  // `done` runs on the instance's owner (`owners`) once the commit is
  // durable, or refused, or nothing was to commit (never inside this call
  // with `owners`).
  void MutateAsync(const std::string& id, Mutation fn, std::optional<Lease> fence,
                   Completion<Status> done);
  // MutateAsync begun on the owner of `id` (`owners`), after the task
  // the owner runs now: so after all that task's commit continuation does
  // (a client answered from a commit, a ?wait that settled, must not find
  // what that continuation is about to release, such as the mark of the
  // step action the commit ended). Counted by WaitIdle from this call.
  void MutateAsyncOnOwner(const std::string& id, Mutation fn, std::optional<Lease> fence,
                          Completion<Status> done);

  // Returns once every MutateAsync begun so far has completed: its `done`
  // returned. After a stop
  // has let every instance go (RunTable::StopAndWait), this is what keeps
  // the executor alive until no store thread is still posting to it.
  void WaitIdle();

  Store& store() { return store_; }

 private:
  void CachePut(const std::string& id, std::shared_ptr<const Instance> inst);
  // One MutateAsync under way (it holds the instance's turn).
  struct Pending {
    std::string id;
    Mutation fn;
    std::optional<Lease> fence;
    Completion<Status> done;
    int attempt = 0;
  };
  // Loads, applies fn, and hands the write to the store; *w stays null when
  // fn failed or added no event (nothing to commit).
  Status Build(Pending& p, std::shared_ptr<TransitionWrite>* w, std::shared_ptr<Instance>* next);
  // Counts a MutateAsync as under way (WaitIdle) and keeps its state.
  std::shared_ptr<Pending> Begin(Pending pending);
  void Attempt(const std::shared_ptr<Pending>& p);
  void AfterCommit(const std::shared_ptr<Pending>& p, const std::shared_ptr<TransitionWrite>& w,
                   const std::shared_ptr<Instance>& next, std::chrono::steady_clock::duration took,
                   const Status& s);
  // Ends p's turn and completes it with s; called on the owner (through
  // OnOwner).
  void Finish(const std::shared_ptr<Pending>& p, const Status& s);
  // Runs fn on the owner of `id` (`owners`), else at once.
  void OnOwner(const std::string& id, Task fn);
  // One MutateAsync fewer under way (WaitIdle).
  void EndInFlight();
  // REQUIRES: the turn of id held when `keep` (a copy read is cached).
  // `keep`: a copy read from the store is cached (false for Peek).
  StatusOr<std::shared_ptr<const Instance>> LoadLocked(const std::string& id, bool keep = true);

  Store& store_;
  const Clock& clock_;
  Listener& listener_;
  Executor* const owners_;
  InstanceTurns turns_;
  Mutex cache_mu_;
  std::unordered_map<std::string, std::shared_ptr<const Instance>> cache_ GUARDED_BY(cache_mu_);
  InFlight in_flight_;  // MutateAsync / CreateAsync begun, not completed
};

}  // namespace sagad
