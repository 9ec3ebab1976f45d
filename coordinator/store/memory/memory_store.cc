#include "coordinator/store/memory/memory_store.h"

#include <algorithm>
#include <cstdlib>

#include "coordinator/store/lease_rule.h"
#include "sagas/step_key.h"
#include "util/mutex.h"

namespace sagad {

struct MemoryData {
  Mutex mu;
  std::map<std::string, nlohmann::json> instances GUARDED_BY(mu);  // by id (creation order)
  std::map<std::string, ActiveInstance> active GUARDED_BY(mu);
  std::map<std::string, std::vector<Event>> events GUARDED_BY(mu);
  std::map<std::string, OperationRecord> operations GUARDED_BY(mu);
  std::map<std::string, Submission> submissions GUARDED_BY(mu);
  std::map<std::string, std::string> submission_of GUARDED_BY(mu);  // instance id -> key
  std::map<std::string, Lease> leases GUARDED_BY(mu);
  std::map<uint64_t, nlohmann::json> outbox GUARDED_BY(mu);
  uint64_t outbox_seq GUARDED_BY(mu) = 0;
  std::vector<std::string> paused GUARDED_BY(mu);  // sorted
  nlohmann::json pause_notes GUARDED_BY(mu) = nlohmann::json::object();
  std::map<std::pair<std::string, int>, nlohmann::json> definitions GUARDED_BY(mu);
};

namespace {

bool IsTerminal(const nlohmann::json& snapshot) {
  std::string s = snapshot.value("status", "");
  return s == "COMPLETED" || s == "COMPENSATED";
}

// The snapshot, its index entry, events, operation and outbox records of one
// write that passed its checks.
void Apply(MemoryData& d, const std::string& id, const nlohmann::json& snapshot,
           const std::vector<Event>& events, const std::vector<OperationRecord>& operations,
           const std::vector<nlohmann::json>& outbox) REQUIRES(d.mu) {
  d.instances[id] = snapshot;
  if (IsTerminal(snapshot)) {
    d.active.erase(id);
    d.leases.erase(id);
  } else {
    d.active[id] = ActiveInstance{id, snapshot.value("saga", ""), snapshot.value("status", ""),
                                  snapshot.value("version", uint64_t(0))};
  }
  auto& log = d.events[id];
  log.insert(log.end(), events.begin(), events.end());
  for (const auto& op : operations) d.operations[op.key] = op;
  for (const auto& m : outbox) d.outbox[++d.outbox_seq] = m;
}

StatusOr<Lease> TakeLease(MemoryData& d, const std::string& id, const std::string& owner,
                          int64_t now_ms, int64_t ttl_ms, const std::string& successor_of)
    REQUIRES(d.mu) {
  auto it = d.leases.find(id);
  auto l = TakeLeaseRule(id, it == d.leases.end() ? Lease{} : it->second, owner, now_ms, ttl_ms,
                         successor_of);
  if (l.ok()) d.leases[id] = *l;
  return l;
}

}  // namespace

MemoryStore::MemoryStore() : data_(std::make_shared<MemoryData>()) {}

MemoryStore::MemoryStore(std::shared_ptr<MemoryData> data) : data_(std::move(data)) {}

MemoryStore::~MemoryStore() = default;

Status MemoryStore::CreateInstance(const nlohmann::json& snapshot, const std::vector<Event>& events,
                                   const Submission* submission,
                                   const std::vector<nlohmann::json>& outbox, const Lease* lease,
                                   const std::vector<OperationRecord>& operations) {
  const std::string id = snapshot.at("id").get<std::string>();
  MemoryData& d = *data_;
  MutexLock l(d.mu);
  if (submission && d.submissions.count(submission->key))
    return AlreadyExists("key exists: " + submission->key);
  if (d.instances.count(id)) return AlreadyExists("instance " + id + " exists");
  if (submission) {
    d.submissions[submission->key] = *submission;
    d.submission_of[id] = submission->key;
  }
  if (lease) d.leases[id] = *lease;
  Apply(d, id, snapshot, events, operations, outbox);
  ++synced_;
  return Status::Ok();
}

Status MemoryStore::Commit(const std::string& id, uint64_t expected_version,
                           const nlohmann::json& snapshot, const std::vector<Event>& events,
                           const std::vector<OperationRecord>& operations,
                           const std::vector<nlohmann::json>& outbox, const Lease* lease) {
  MemoryData& d = *data_;
  MutexLock l(d.mu);
  auto it = d.instances.find(id);
  if (it == d.instances.end()) return InstanceNotFound(id);
  uint64_t stored = it->second.value("version", uint64_t(0));
  if (stored != expected_version)
    return Aborted("instance " + id + " changed: version " + std::to_string(stored) +
                   ", expected " + std::to_string(expected_version));
  if (snapshot.value("version", uint64_t(0)) != expected_version + 1)
    return Internal("snapshot version must be expected_version + 1");
  if (lease) {
    auto held = d.leases.find(id);
    Lease owner = held == d.leases.end() ? Lease{} : held->second;
    if (owner.owner != lease->owner || owner.generation != lease->generation)
      return LeaseLost("lease lost: instance " + id + " is owned by '" + owner.owner +
                       "' generation " + std::to_string(owner.generation));
  }
  Apply(d, id, snapshot, events, operations, outbox);
  ++synced_;
  return Status::Ok();
}

StatusOr<Lease> MemoryStore::AcquireLease(const std::string& id, const std::string& owner,
                                          const Clock& clock, int64_t ttl_ms,
                                          const std::string& successor_of) {
  MemoryData& d = *data_;
  MutexLock l(d.mu);
  auto lease = TakeLease(d, id, owner, clock.NowMillis(), ttl_ms, successor_of);
  if (lease.ok()) ++synced_;
  return lease;
}

StatusOr<std::map<std::string, Lease>> MemoryStore::AcquireLeases(
    const std::vector<std::string>& ids, const std::string& owner, const Clock& clock,
    int64_t ttl_ms, const std::string& successor_of) {
  MemoryData& d = *data_;
  MutexLock l(d.mu);
  const int64_t now_ms = clock.NowMillis();
  std::map<std::string, Lease> taken;
  for (const auto& id : ids) {
    auto lease = TakeLease(d, id, owner, now_ms, ttl_ms, successor_of);
    if (lease.ok()) taken.emplace(id, *lease);
  }
  ++synced_;
  return taken;
}

StatusOr<std::vector<std::string>> MemoryStore::RenewLeases(const std::string& owner,
                                                            const std::vector<std::string>& ids,
                                                            const Clock& clock, int64_t ttl_ms) {
  MemoryData& d = *data_;
  MutexLock l(d.mu);
  const int64_t now_ms = clock.NowMillis();
  std::vector<std::string> lost;
  for (const auto& id : ids) {
    auto it = d.leases.find(id);
    if (it == d.leases.end() || it->second.owner != owner) {
      lost.push_back(id);
      continue;
    }
    it->second.expires_at = now_ms + ttl_ms;
  }
  ++synced_;
  return lost;
}

StatusOr<Lease> MemoryStore::GetLease(const std::string& id) {
  MutexLock l(data_->mu);
  auto it = data_->leases.find(id);
  if (it == data_->leases.end()) return NotFound("no lease of " + id);
  return it->second;
}

StatusOr<std::vector<OutboxRecord>> MemoryStore::PeekOutbox(size_t max) {
  MutexLock l(data_->mu);
  std::vector<OutboxRecord> out;
  for (const auto& [seq, m] : data_->outbox) {
    if (out.size() == max) break;
    out.push_back({seq, m});
  }
  return out;
}

Status MemoryStore::AckOutbox(uint64_t seq) {
  MutexLock l(data_->mu);
  data_->outbox.erase(seq);
  return Status::Ok();
}

StatusOr<size_t> MemoryStore::OutboxSize() {
  MutexLock l(data_->mu);
  return data_->outbox.size();
}

StatusOr<nlohmann::json> MemoryStore::GetInstance(const std::string& id) {
  MutexLock l(data_->mu);
  auto it = data_->instances.find(id);
  if (it == data_->instances.end()) return InstanceNotFound(id);
  return it->second;
}

StatusOr<std::vector<Event>> MemoryStore::GetEvents(const std::string& id) {
  MutexLock l(data_->mu);
  auto it = data_->events.find(id);
  if (it == data_->events.end()) return std::vector<Event>{};
  return it->second;
}

StatusOr<OperationRecord> MemoryStore::GetOperation(const std::string& key) {
  MutexLock l(data_->mu);
  auto it = data_->operations.find(key);
  if (it == data_->operations.end()) return NotFound("no operation " + key);
  return it->second;
}

StatusOr<Submission> MemoryStore::GetSubmission(const std::string& key) {
  MutexLock l(data_->mu);
  auto it = data_->submissions.find(key);
  if (it == data_->submissions.end()) return NotFound("no submission " + key);
  return it->second;
}

Status MemoryStore::SetSubmissionResponse(const std::string& key, int status,
                                          const nlohmann::json& response) {
  MutexLock l(data_->mu);
  auto it = data_->submissions.find(key);
  if (it == data_->submissions.end()) return NotFound("no submission " + key);
  if (it->second.response_status != 0) return Status::Ok();  // the first response stands
  it->second.response_status = status;
  it->second.response = response;
  ++synced_;
  return Status::Ok();
}

StatusOr<InstancePage> MemoryStore::ListInstances(const InstanceFilter& filter, size_t limit,
                                                  const std::string& cursor) {
  MemoryData& d = *data_;
  MutexLock l(d.mu);
  InstancePage page;
  if (!filter.idempotency_key.empty()) {
    auto sub = d.submissions.find(filter.idempotency_key);
    if (sub == d.submissions.end()) return page;
    const std::string& id = sub->second.instance_id;
    if (!cursor.empty() && id >= cursor) return page;
    auto it = d.instances.find(id);
    if (it != d.instances.end() && Matches(filter, it->second))
      page.instances.push_back(it->second);
    return page;
  }
  // Newest first; with a cursor, strictly older than it.
  auto it = cursor.empty() ? d.instances.end() : d.instances.lower_bound(cursor);
  while (it != d.instances.begin()) {
    --it;
    if (page.instances.size() == limit) {
      page.next_cursor = page.instances.back().value("id", "");
      break;
    }
    if (Matches(filter, it->second)) page.instances.push_back(it->second);
  }
  return page;
}

StatusOr<std::vector<ActiveInstance>> MemoryStore::ListActive() {
  MutexLock l(data_->mu);
  std::vector<ActiveInstance> out;
  out.reserve(data_->active.size());
  for (const auto& [id, a] : data_->active) out.push_back(a);
  return out;
}

StatusOr<std::vector<std::string>> MemoryStore::DeleteFinished(int64_t finished_before_ms,
                                                               size_t max) {
  MemoryData& d = *data_;
  MutexLock l(d.mu);
  std::vector<std::string> ids;
  for (const auto& [id, snap] : d.instances) {
    if (ids.size() == max) break;
    long long created =
        id.size() > 12 && id[12] == '-' ? std::strtoll(id.substr(0, 12).c_str(), nullptr, 16) : -1;
    if (created > finished_before_ms) break;
    if (IsTerminal(snap) && snap.value("updated_at", int64_t(0)) < finished_before_ms)
      ids.push_back(id);
  }
  for (const auto& id : ids) {
    const nlohmann::json& snap = d.instances[id];
    for (const auto& st : snap.value("steps", nlohmann::json::array())) {
      std::string step = st.value("name", "");
      d.operations.erase(StepKey(id, step));
      d.operations.erase(CompensationKey(id, step));
    }
    auto key = d.submission_of.find(id);
    if (key != d.submission_of.end()) {
      d.submissions.erase(key->second);
      d.submission_of.erase(key);
    }
    d.instances.erase(id);
    d.active.erase(id);
    d.leases.erase(id);
    d.events.erase(id);
  }
  if (!ids.empty()) ++synced_;
  return ids;
}

StatusOr<std::vector<std::string>> MemoryStore::PausedServices() {
  MutexLock l(data_->mu);
  return data_->paused;
}

StatusOr<nlohmann::json> MemoryStore::PauseNotes() {
  MutexLock l(data_->mu);
  return data_->pause_notes;
}

Status MemoryStore::SetServicePaused(const std::string& service, bool paused,
                                     const nlohmann::json& note) {
  MutexLock l(data_->mu);
  auto& names = data_->paused;
  auto it = std::find(names.begin(), names.end(), service);
  if (paused == (it != names.end())) return Status::Ok();  // already so
  if (paused)
    names.insert(std::upper_bound(names.begin(), names.end(), service), service);
  else
    names.erase(it);
  if (paused && note.is_object())
    data_->pause_notes[service] = note;
  else
    data_->pause_notes.erase(service);
  ++synced_;
  return Status::Ok();
}

StatusOr<bool> MemoryStore::PutDefinition(const std::string& name, int version,
                                          const nlohmann::json& body) {
  MutexLock l(data_->mu);
  auto [it, added] = data_->definitions.emplace(std::make_pair(name, version), body);
  if (added) {
    ++synced_;
    return true;
  }
  if (it->second != body)
    return AlreadyExists("saga '" + name + "' version " + std::to_string(version) +
                         " is deployed with another body");
  return false;
}

StatusOr<std::vector<StoredDefinition>> MemoryStore::ListDefinitions() {
  MutexLock l(data_->mu);
  std::vector<StoredDefinition> out;
  for (const auto& [key, body] : data_->definitions) out.push_back({key.first, key.second, body});
  return out;
}

}  // namespace sagad
