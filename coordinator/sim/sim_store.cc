#include "coordinator/sim/sim_store.h"

#include <algorithm>
#include <optional>

#include "coordinator/sim/world.h"
#include "util/json_limits.h"
#include "util/thread_role.h"

namespace sagad::sim {

int64_t SimStore::TrueClock::NowMillis() const { return world_.now(); }

std::chrono::steady_clock::time_point SimStore::TrueClock::SteadyNow() const {
  return std::chrono::steady_clock::time_point(std::chrono::milliseconds(world_.now()));
}

SimStore::SimStore(World& world, int proc)
    : world_(world), proc_(proc), inner_(world.data()), true_clock_(world) {}

bool SimStore::ReadsMayWait() const { return world_.scenario().remote_reads; }

Status SimStore::Dead() const {
  return Unavailable("simulated process " + std::to_string(proc_) + " is dead");
}

namespace {

Status RefuseNul(const nlohmann::json& snapshot, const std::vector<Event>& events) {
  bool nul = !FindNul(snapshot).empty();
  for (const Event& e : events) nul = nul || !FindNul(e.data).empty();
  if (!nul) return Status::Ok();
  return InvalidArgument(
      "unsupported Unicode escape sequence: \\u0000 cannot be converted to text");
}

}  // namespace

Status SimStore::Write(const char* what, const std::function<Status()>& apply) {
  if (dead_) return Dead();
  const StoreFaultRates& f = world_.scenario().store_faults;
  SeededRandom& r = world_.random();
  if (r.Chance(f.slow)) {
    int64_t wait = 1 + static_cast<int64_t>(r.Below(2 * world_.scenario().lease_ms));
    SIM_TRACE(world_, "store slow " + std::to_string(wait) + " ms: " + what);
    world_.RunOthers(proc_, world_.now() + wait);
    if (dead_) return Dead();
  }
  if (r.Chance(f.crash_before)) {
    SIM_TRACE(world_, std::string("crash before ") + what);
    world_.Crash(proc_);
    return Dead();
  }
  if (r.Chance(f.fail)) {
    SIM_TRACE(world_, std::string("store fails ") + what);
    return Unavailable(std::string("simulated store failure: ") + what);
  }
  Status s = apply();
  if (!s.ok()) return s;
  if (r.Chance(f.crash_after)) {
    SIM_TRACE(world_, std::string("crash after ") + what);
    world_.Crash(proc_);
    return Dead();
  }
  if (r.Chance(f.fail_after)) {
    SIM_TRACE(world_, std::string("store applies then fails ") + what);
    return Unavailable(std::string("simulated ambiguous commit: ") + what);
  }
  return s;
}

void SimStore::CheckMayBlock(const char* what) {
  if (dead_ || !MustNotBlock(CurrentThreadRole())) return;
  world_.Violation(std::string("a blocking store ") + what + " on a thread that must not block (" +
                   ThreadRoleName(CurrentThreadRole()) +
                   " thread): production aborts there, and a committer waiting for a commit "
                   "waits for itself");
}

void SimStore::Committer(std::function<void()> write) {
  const auto& p = world_.processes()[static_cast<size_t>(proc_)];
  world_.Schedule(world_.now() + static_cast<int64_t>(world_.random().Below(3)), proc_,
                  p.incarnation, false, [write = std::move(write)] {
                    ScopedThreadRole role(ThreadRole::kCommitter);
                    write();
                  });
}

void SimStore::CreateInstanceAsync(std::shared_ptr<const CreationWrite> w,
                                   std::function<void(Status)> done) {
  if (dead_) return done(Dead());
  Committer([this, w, done = std::move(done)] {
    done(Create(w->snapshot, w->events, w->submission ? &*w->submission : nullptr, w->outbox,
                w->lease ? &*w->lease : nullptr, w->operations));
  });
}

void SimStore::CommitAsync(std::shared_ptr<const TransitionWrite> w,
                           std::function<void(Status)> done) {
  if (dead_) return done(Dead());
  Committer([this, w, done = std::move(done)] {
    done(Transition(w->id, w->expected_version, w->snapshot.Parse(), w->events, w->operations,
                    w->outbox, w->fence ? &*w->fence : nullptr));
  });
}

void SimStore::SetSubmissionResponseAsync(const std::string& key, int status,
                                          const nlohmann::json& response,
                                          std::function<void(Status)> done) {
  if (dead_) return done(Dead());
  Committer([this, key, status, response, done = std::move(done)] {
    done(Write("submission response",
               [&] { return inner_.SetSubmissionResponse(key, status, response); }));
  });
}

Status SimStore::CreateInstance(const nlohmann::json& snapshot, const std::vector<Event>& events,
                                const Submission* submission,
                                const std::vector<nlohmann::json>& outbox, const Lease* lease,
                                const std::vector<OperationRecord>& operations) {
  CheckMayBlock("creation");
  return Create(snapshot, events, submission, outbox, lease, operations);
}

Status SimStore::Commit(const std::string& id, uint64_t expected_version,
                        const nlohmann::json& snapshot, const std::vector<Event>& events,
                        const std::vector<OperationRecord>& operations,
                        const std::vector<nlohmann::json>& outbox, const Lease* lease) {
  CheckMayBlock("commit");
  return Transition(id, expected_version, snapshot, events, operations, outbox, lease);
}

Status SimStore::Create(const nlohmann::json& snapshot, const std::vector<Event>& events,
                        const Submission* submission, const std::vector<nlohmann::json>& outbox,
                        const Lease* lease, const std::vector<OperationRecord>& operations) {
  if (!dead_) SAGAD_RETURN_IF_ERROR(RefuseNul(snapshot, events));
  // As PostgreSQL stores it (postgres_store.cc LeaseJson, sagad_apply): a
  // creation's first lease is the time it has left by the process's clock,
  // counted from the database's, never the process's clock reading itself.
  // Stored as read, the expiry of a process whose clock is behind came early
  // in the database's time: another process could take the instance while
  // this one still sent (found by the campaign, seed 405270).
  std::optional<Lease> first;
  if (lease) {
    first = *lease;
    const int64_t left = lease->expires_at - world_.processes()[proc_].clock->NowMillis();
    first->expires_at = world_.now() + std::max<int64_t>(0, left);
  }
  return Write("create", [&] {
    return inner_.CreateInstance(snapshot, events, submission, outbox, first ? &*first : nullptr,
                                 operations);
  });
}

Status SimStore::Transition(const std::string& id, uint64_t expected_version,
                            const nlohmann::json& snapshot, const std::vector<Event>& events,
                            const std::vector<OperationRecord>& operations,
                            const std::vector<nlohmann::json>& outbox, const Lease* lease) {
  if (world_.scenario().bug == Bug::kLyingFsync && !dead_ && world_.random().Chance(0.02))
    return Status::Ok();  // the bug: "durable", never written
  if (!dead_) SAGAD_RETURN_IF_ERROR(RefuseNul(snapshot, events));
  if (!events.empty() && events.back().seq > World::kMaxLog)
    world_.Violation("runaway log: instance " + id + " has more than " +
                     std::to_string(World::kMaxLog) +
                     " events (one takes tens): the engine keeps writing without settling");
  return Write("commit", [&] {
    return inner_.Commit(id, expected_version, snapshot, events, operations, outbox, lease);
  });
}

StatusOr<Lease> SimStore::AcquireLease(const std::string& id, const std::string& owner,
                                       const Clock&, int64_t ttl_ms,
                                       const std::string& successor_of) {
  StatusOr<Lease> out = Dead();
  Status s = Write("acquire lease", [&] {
    out = inner_.AcquireLease(id, owner, true_clock_, ttl_ms, successor_of);
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}

StatusOr<std::map<std::string, Lease>> SimStore::AcquireLeases(const std::vector<std::string>& ids,
                                                               const std::string& owner,
                                                               const Clock&, int64_t ttl_ms,
                                                               const std::string& successor_of) {
  StatusOr<std::map<std::string, Lease>> out = Dead();
  Status s = Write("acquire leases", [&] {
    out = inner_.AcquireLeases(ids, owner, true_clock_, ttl_ms, successor_of);
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}

StatusOr<std::vector<std::string>> SimStore::RenewLeases(const std::string& owner,
                                                         const std::vector<std::string>& ids,
                                                         const Clock&, int64_t ttl_ms) {
  StatusOr<std::vector<std::string>> out = Dead();
  Status s = Write("renew leases", [&] {
    out = inner_.RenewLeases(owner, ids, true_clock_, ttl_ms);
    if (out.ok() && world_.scenario().bug == Bug::kTwoOwners)
      out = std::vector<std::string>{};  // the bug: "still yours", whoever holds them
    return out.status();
  });
  if (!s.ok()) return s;
  return out;
}

Status SimStore::SetSubmissionResponse(const std::string& key, int status,
                                       const nlohmann::json& response) {
  CheckMayBlock("submission response");
  return Write("submission response",
               [&] { return inner_.SetSubmissionResponse(key, status, response); });
}

// Reads and the writes the simulation does not fault (operator-level ones).
#define SAGAD_SIM_READ(call) \
  if (dead_) return Dead();  \
  return inner_.call

StatusOr<Lease> SimStore::GetLease(const std::string& id) { SAGAD_SIM_READ(GetLease(id)); }
StatusOr<std::vector<OutboxRecord>> SimStore::PeekOutbox(size_t max) {
  SAGAD_SIM_READ(PeekOutbox(max));
}
Status SimStore::AckOutbox(uint64_t seq) { SAGAD_SIM_READ(AckOutbox(seq)); }
StatusOr<size_t> SimStore::OutboxSize() { SAGAD_SIM_READ(OutboxSize()); }
StatusOr<nlohmann::json> SimStore::GetInstance(const std::string& id) {
  SAGAD_SIM_READ(GetInstance(id));
}
StatusOr<std::vector<Event>> SimStore::GetEvents(const std::string& id) {
  SAGAD_SIM_READ(GetEvents(id));
}
StatusOr<OperationRecord> SimStore::GetOperation(const std::string& key) {
  SAGAD_SIM_READ(GetOperation(key));
}
StatusOr<Submission> SimStore::GetSubmission(const std::string& key) {
  SAGAD_SIM_READ(GetSubmission(key));
}
StatusOr<InstancePage> SimStore::ListInstances(const InstanceFilter& filter, size_t limit,
                                               const std::string& cursor) {
  SAGAD_SIM_READ(ListInstances(filter, limit, cursor));
}
StatusOr<std::vector<ActiveInstance>> SimStore::ListActive() { SAGAD_SIM_READ(ListActive()); }
StatusOr<std::vector<std::string>> SimStore::DeleteFinished(int64_t finished_before_ms,
                                                            size_t max) {
  SAGAD_SIM_READ(DeleteFinished(finished_before_ms, max));
}
StatusOr<std::vector<std::string>> SimStore::PausedServices() { SAGAD_SIM_READ(PausedServices()); }
Status SimStore::SetServicePaused(const std::string& service, bool paused,
                                  const nlohmann::json& note) {
  SAGAD_SIM_READ(SetServicePaused(service, paused, note));
}
StatusOr<nlohmann::json> SimStore::PauseNotes() { SAGAD_SIM_READ(PauseNotes()); }
StatusOr<bool> SimStore::PutDefinition(const std::string& name, int version,
                                       const nlohmann::json& body) {
  SAGAD_SIM_READ(PutDefinition(name, version, body));
}
StatusOr<std::vector<StoredDefinition>> SimStore::ListDefinitions() {
  SAGAD_SIM_READ(ListDefinitions());
}

#undef SAGAD_SIM_READ

void SimStore::Kill() {
  dead_ = true;
  auto& locks = world_.shared_locks();
  for (auto it = locks.begin(); it != locks.end();)
    it = it->second.first == proc_ ? locks.erase(it) : std::next(it);
}

StatusOr<std::function<void()>> SimStore::LockShared(const std::string& name) {
  if (dead_) return Dead();
  auto& locks = world_.shared_locks();
  if (locks.count(name))
    return Unavailable("the shared lock '" + name + "' is held by process " +
                       std::to_string(locks[name].first));
  const uint64_t serial = world_.NextSerial();
  locks[name] = {proc_, serial};
  return std::function<void()>([&world = world_, name, serial] {
    auto& held = world.shared_locks();
    auto it = held.find(name);
    if (it != held.end() && it->second.second == serial) held.erase(it);
  });
}

}  // namespace sagad::sim
