#include "coordinator/engine/instances/instance_repository.h"

namespace sagad {
namespace {

// A quick look for a snapshot that disagrees with the log (the full
// comparison is `sagactl verify`, offline): saga and step states.
bool AgreesWithSnapshot(const Instance& inst, const nlohmann::json& snap) {
  const nlohmann::json& steps = snap.contains("steps") ? snap["steps"] : nlohmann::json();
  if (snap.value("status", "") != inst.StatusName() ||
      snap.value("last_seq", int64_t(0)) != inst.last_seq() || !steps.is_array() ||
      steps.size() != inst.steps().size())
    return false;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].value("status", "") != StepStatusName(inst.step(i).status())) return false;
  return true;
}

}  // namespace

std::vector<nlohmann::json> InstanceRepository::Listener::OutboxMessages(
    const Instance&, const std::vector<Event>&) {
  return {};
}
void InstanceRepository::Listener::Committed(const Commit&) {}
void InstanceRepository::Listener::CommitAttempted(std::chrono::steady_clock::duration) {}
void InstanceRepository::Listener::Log(LogLevel, nlohmann::json) {}

namespace {
InstanceRepository::Listener& NoListener() {
  static InstanceRepository::Listener none;
  return none;
}
}  // namespace

InstanceRepository::InstanceRepository(Store& store, const Clock& clock, Listener* listener,
                                       Executor* owners)
    : store_(store),
      clock_(clock),
      listener_(listener ? *listener : NoListener()),
      owners_(owners) {}

void InstanceRepository::CachePut(const std::string& id, std::shared_ptr<const Instance> inst) {
  MutexLock l(cache_mu_);
  if (IsTerminal(inst->status()))
    cache_.erase(id);
  else
    cache_[id] = std::move(inst);
}

uint64_t InstanceRepository::CachedVersion(const std::string& id) {
  MutexLock l(cache_mu_);
  auto it = cache_.find(id);
  return it == cache_.end() ? 0 : it->second->version();
}

std::shared_ptr<const Instance> InstanceRepository::CachedCopy(const std::string& id) {
  MutexLock l(cache_mu_);
  auto it = cache_.find(id);
  return it == cache_.end() ? nullptr : it->second;
}

size_t InstanceRepository::Cached() {
  MutexLock l(cache_mu_);
  return cache_.size();
}

void InstanceRepository::Evict(const std::string& id) {
  MutexLock l(cache_mu_);
  cache_.erase(id);
}

StatusOr<std::shared_ptr<const Instance>> InstanceRepository::LoadLocked(const std::string& id,
                                                                         bool keep) {
  {
    MutexLock l(cache_mu_);
    auto it = cache_.find(id);
    if (it != cache_.end()) return it->second;
  }
  auto snap = store_.GetInstance(id);
  if (!snap.ok()) return snap.status();
  auto events = store_.GetEvents(id);
  if (!events.ok()) return events.status();
  auto inst = Instance::Replay(id, *events);
  if (!inst.ok()) return inst.status();
  inst->set_version(snap->value("version", uint64_t(0)));
  if (!AgreesWithSnapshot(*inst, *snap))
    listener_.Log(
        LogLevel::kWarn,
        {{"msg", "snapshot differs from replayed event log; using the log"}, {"instance", id}});
  listener_.Log(LogLevel::kDebug,
                {{"msg", "replayed"}, {"instance", id}, {"events", events->size()}});
  std::shared_ptr<const Instance> ptr = std::make_shared<Instance>(std::move(*inst));
  if (keep) CachePut(id, ptr);
  return ptr;
}

StatusOr<std::shared_ptr<const Instance>> InstanceRepository::Load(const std::string& id) {
  // A transition under way holds the turn across its commit: the cached
  // copy is the last one committed; without one, the store's is read and
  // not cached (it may be older than what that commit is about to cache).
  if (!turns_.TryTake(id)) return LoadLocked(id, /*keep=*/false);
  auto inst = LoadLocked(id);
  turns_.End(id);
  return inst;
}

StatusOr<std::shared_ptr<const Instance>> InstanceRepository::Peek(const std::string& id) {
  return LoadLocked(id, /*keep=*/false);  // caches nothing: needs no turn
}

Status InstanceRepository::Create(const Instance& inst, const std::vector<Event>& events,
                                  const std::vector<OperationRecord>& ops,
                                  const Submission* submission, const Lease* lease) {
  InstanceTurns::Held turn(turns_, inst.id());
  auto t0 = clock_.SteadyNow();
  auto snapshot = std::make_shared<const nlohmann::json>(inst.ToJson());
  SAGAD_RETURN_IF_ERROR(store_.CreateInstance(*snapshot, events, submission,
                                              listener_.OutboxMessages(inst, events), lease, ops));
  auto took = clock_.SteadyNow() - t0;
  listener_.CommitAttempted(took);
  auto ptr = std::make_shared<const Instance>(inst);
  CachePut(inst.id(), ptr);
  listener_.Committed(Commit{inst.id(), ptr, &events, snapshot, took});
  return Status::Ok();
}

void InstanceRepository::CreateAsync(const Instance& inst, const std::vector<Event>& events,
                                     const std::vector<OperationRecord>& ops,
                                     const Submission* submission, const Lease* lease,
                                     Completion<Status> done) {
  auto w = std::make_shared<CreationWrite>();
  w->snapshot = inst.ToJson();
  w->events = events;
  w->operations = ops;
  w->outbox = listener_.OutboxMessages(inst, events);
  if (submission) w->submission = *submission;
  if (lease) w->lease = *lease;
  auto ptr = std::make_shared<const Instance>(inst);
  auto p = std::make_shared<Pending>(Pending{inst.id(), nullptr, std::nullopt, std::move(done)});
  in_flight_.Begin();
  turns_.TakeAsync(p->id, [this, p, w, ptr] {
    auto t0 = clock_.SteadyNow();
    store_.CreateInstanceAsync(w, [this, p, w, ptr, t0](Status s) {
      auto took = clock_.SteadyNow() - t0;
      OnOwner(p->id, [this, p, w, ptr, took, s] {
        listener_.CommitAttempted(took);
        if (s.ok()) {
          CachePut(p->id, ptr);
          auto snapshot = std::make_shared<const nlohmann::json>(w->snapshot);
          listener_.Committed(Commit{p->id, ptr, &w->events, snapshot, took});
        }
        Finish(p, s);
      });
    });
  });
}

Status InstanceRepository::Mutate(const std::string& id, const Mutation& fn, const Lease* fence) {
  InstanceTurns::Held turn(turns_, id);
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto cur = LoadLocked(id);
    if (!cur.ok()) return cur.status();
    auto next = std::make_shared<Instance>(**cur);
    Tx tx(*next, clock_.NowMillis());
    SAGAD_RETURN_IF_ERROR(fn(tx));
    if (tx.events().empty()) return Status::Ok();
    next->set_version((*cur)->version() + 1);
    auto t0 = clock_.SteadyNow();
    auto snapshot = std::make_shared<const nlohmann::json>(next->ToJson());
    Status s = store_.Commit(id, (*cur)->version(), *snapshot, tx.events(), tx.Operations(),
                             listener_.OutboxMessages(*next, tx.events()), fence);
    auto took = clock_.SteadyNow() - t0;
    listener_.CommitAttempted(took);
    if (s.code() == StatusCode::kLeaseLost) {  // fenced
      Evict(id);
      return s;
    }
    if (s.code() == StatusCode::kAborted) {  // lost a race: reload
      Evict(id);
      continue;
    }
    if (!s.ok()) {
      Evict(id);
      return s;
    }
    CachePut(id, next);
    listener_.Committed(Commit{id, next, &tx.events(), snapshot, took});
    return Status::Ok();
  }
  return Unavailable("instance " + id + " keeps changing under us; try again");
}

auto InstanceRepository::Begin(Pending pending) -> std::shared_ptr<Pending> {
  in_flight_.Begin();
  return std::make_shared<Pending>(std::move(pending));
}

void InstanceRepository::MutateAsync(const std::string& id, Mutation fn, std::optional<Lease> fence,
                                     Completion<Status> done) {
  auto p = Begin(Pending{id, std::move(fn), std::move(fence), std::move(done)});
  turns_.TakeAsync(id, [this, p] { Attempt(p); });
}

void InstanceRepository::MutateAsyncOnOwner(const std::string& id, Mutation fn,
                                            std::optional<Lease> fence, Completion<Status> done) {
  auto p = Begin(Pending{id, std::move(fn), std::move(fence), std::move(done)});
  OnOwner(id, [this, p] { turns_.TakeAsync(p->id, [this, p] { Attempt(p); }); });
}

void InstanceRepository::WaitIdle() { in_flight_.WaitNone(); }

Status InstanceRepository::Build(Pending& p, std::shared_ptr<TransitionWrite>* w,
                                 std::shared_ptr<Instance>* next) {
  auto cur = LoadLocked(p.id);
  if (!cur.ok()) return cur.status();
  *next = std::make_shared<Instance>(**cur);
  Tx tx(**next, clock_.NowMillis());
  SAGAD_RETURN_IF_ERROR(p.fn(tx));
  if (tx.events().empty()) return Status::Ok();
  (*next)->set_version((*cur)->version() + 1);
  auto write = std::make_shared<TransitionWrite>();
  write->id = p.id;
  write->expected_version = (*cur)->version();
  write->snapshot = SnapshotRecord::FromInstance(**next);  // only what changed is serialised
  write->events = tx.events();
  write->operations = tx.Operations();
  write->outbox = listener_.OutboxMessages(**next, write->events);
  write->fence = p.fence;
  *w = std::move(write);
  return Status::Ok();
}

void InstanceRepository::Attempt(const std::shared_ptr<Pending>& p) {
  std::shared_ptr<TransitionWrite> w;
  std::shared_ptr<Instance> next;
  Status s;
  try {
    s = Build(*p, &w, &next);
  } catch (const std::exception& e) {  // a bug in a transition: the turn still ends
    s = Internal(std::string("transition failed: ") + e.what());
  }
  if (!s.ok() || !w) {
    // Nothing to commit, on whichever thread ran this (the one that asked,
    // or the one that ended the turn before: an operator's handler): the
    // turn ends and `done` runs on the owner, as after a commit.
    OnOwner(p->id, [this, p, s] { Finish(p, s); });
    return;
  }
  auto t0 = clock_.SteadyNow();
  store_.CommitAsync(w, [this, p, w, next, t0](Status c) {
    auto took = clock_.SteadyNow() - t0;
    OnOwner(p->id, [this, p, w, next, took, c] { AfterCommit(p, w, next, took, c); });
  });
}

void InstanceRepository::AfterCommit(const std::shared_ptr<Pending>& p,
                                     const std::shared_ptr<TransitionWrite>& w,
                                     const std::shared_ptr<Instance>& next,
                                     std::chrono::steady_clock::duration took, const Status& s) {
  listener_.CommitAttempted(took);
  if (s.code() == StatusCode::kAborted && ++p->attempt < 5) {  // lost a race: reload
    Evict(p->id);
    Attempt(p);
    return;
  }
  if (s.code() == StatusCode::kAborted) {
    Evict(p->id);
    Finish(p, Unavailable("instance " + p->id + " keeps changing under us; try again"));
    return;
  }
  if (!s.ok()) {  // fenced (kLeaseLost) or storage trouble
    Evict(p->id);
    Finish(p, s);
    return;
  }
  CachePut(p->id, next);
  listener_.Committed(Commit{p->id, next, &w->events, nullptr, took});
  Finish(p, s);
}

void InstanceRepository::Finish(const std::shared_ptr<Pending>& p, const Status& s) {
  turns_.End(p->id);
  struct Completed {  // even if `done` throws
    InstanceRepository* repo;
    ~Completed() { repo->EndInFlight(); }
  } completed{this};
  p->done(s);
}

void InstanceRepository::OnOwner(const std::string& id, Task fn) {
  if (owners_)
    owners_->PostTo(id, std::move(fn));
  else
    fn();
}

void InstanceRepository::EndInFlight() { in_flight_.End(); }

}  // namespace sagad
