#include "coordinator/store/lmdb/lmdb_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "coordinator/store/lease_rule.h"
#include "coordinator/store/lmdb/lmdb_util.h"
#include "util/json_limits.h"

namespace sagad {
using namespace lmdb_util;

static std::string SeqKey(uint64_t seq) {
  std::string k;
  for (int i = 7; i >= 0; --i) k.push_back(static_cast<char>((seq >> (i * 8)) & 0xff));
  return k;
}

static uint64_t SeqFromKey(const MDB_val& v) {
  uint64_t seq = 0;
  const unsigned char* p = static_cast<const unsigned char*>(v.mv_data);
  for (size_t i = 0; i < 8 && i < v.mv_size; ++i) seq = (seq << 8) | p[i];
  return seq;
}

// The `active` entry of an unfinished instance: 8-byte big-endian version,
// saga, NUL, status (read back by IndexedState).
static std::string ActiveEntry(const SnapshotRecord& snapshot) {
  return SeqKey(snapshot.version) + snapshot.saga + '\0' + snapshot.status;
}

// The record of a snapshot given as a tree; one that cannot be written
// refuses its write.
static StatusOr<SnapshotRecord> RecordOf(const nlohmann::json& snapshot) {
  try {
    return SnapshotRecord::FromJson(snapshot);
  } catch (const std::exception& e) {
    return Internal(std::string("write refused: ") + e.what());
  }
}

// The listing's index keys of a snapshot (LmdbStore::PutIndexes).
std::vector<std::string> LmdbStore::IndexKeys(const std::string& id, const SnapshotRecord& r) {
  std::vector<std::string> out;
  auto add = [&](char code, const std::string& value) {
    if (value.empty() || value.find('\0') != std::string::npos) return;
    std::string k = IndexPrefix(code, value) + id;
    if (k.size() <= kMaxIndexKey) out.push_back(std::move(k));
  };
  add('s', r.status);
  add('g', r.saga);
  if (r.waiting_for.is_string()) add('w', r.waiting_for.get<std::string>());
  add('o', r.owner);
  return out;
}

Status LmdbStore::PutIndexes(MDB_txn* txn, const std::string& id, const SnapshotRecord* snapshot) {
  std::vector<std::string> now = snapshot ? IndexKeys(id, *snapshot) : std::vector<std::string>{};
  const std::string now_text = DumpJson(now);
  // Most transitions change none of the indexed fields: the stored text
  // is compared as it is, and parsed only when it differs.
  auto held = ReadString(txn, indexed_, id);
  if (held.ok() ? *held == now_text : now.empty()) return Status::Ok();
  std::vector<std::string> before;
  if (held.ok()) {
    auto j = nlohmann::json::parse(*held, nullptr, false);
    if (j.is_array())
      for (const auto& k : j)
        if (k.is_string()) before.push_back(k.get<std::string>());
  }
  for (const auto& k : before) {
    if (std::find(now.begin(), now.end(), k) != now.end()) continue;
    MDB_val key = Val(k);
    int rc = mdb_del(txn, by_field_, &key, nullptr);
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbError("mdb_del", rc);
  }
  for (const auto& k : now) {
    if (std::find(before.begin(), before.end(), k) != before.end()) continue;
    SAGAD_RETURN_IF_ERROR(PutText(txn, by_field_, k, ""));
  }
  if (now.empty()) {
    MDB_val key = Val(id);
    int rc = mdb_del(txn, indexed_, &key, nullptr);
    return rc == 0 || rc == MDB_NOTFOUND ? Status::Ok() : LmdbError("mdb_del", rc);
  }
  return PutText(txn, indexed_, id, now_text);
}

Status LmdbStore::PutSnapshot(MDB_txn* txn, const std::string& id, const SnapshotRecord& snapshot) {
  SAGAD_RETURN_IF_ERROR(PutText(txn, instances_, id, snapshot.text));
  SAGAD_RETURN_IF_ERROR(PutIndexes(txn, id, &snapshot));
  MDB_val k = Val(id);
  if (IsTerminalName(snapshot.status)) {
    int rc = mdb_del(txn, active_, &k, nullptr);
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbError("mdb_del", rc);
  } else {
    std::string entry = ActiveEntry(snapshot);
    MDB_val v = Val(entry);
    int rc = mdb_put(txn, active_, &k, &v, 0);
    if (rc != 0) return LmdbError("mdb_put", rc);
  }
  return Status::Ok();
}

Status LmdbStore::AppendOutbox(MDB_txn* txn, const std::vector<std::string>& outbox) {
  if (outbox.empty()) return Status::Ok();
  Cursor cur(txn, outbox_);
  if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
  int rc = 0;
  MDB_val k, v;
  uint64_t last = 0;
  rc = cur.Get(&k, &v, MDB_LAST);
  if (rc == 0)
    last = SeqFromKey(k);
  else if (rc != MDB_NOTFOUND) {
    return LmdbError("mdb_cursor_get", rc);
  }
  for (const auto& m : outbox)
    SAGAD_RETURN_IF_ERROR(PutText(txn, outbox_, SeqKey(++last), m, MDB_APPEND));
  return Status::Ok();
}

StatusOr<std::vector<OutboxRecord>> LmdbStore::PeekOutbox(size_t max) {
  Txn txn(env_, false);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  Cursor cur(txn.get(), outbox_);
  if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
  int rc = 0;
  std::vector<OutboxRecord> out;
  MDB_val k, v;
  for (rc = cur.Get(&k, &v, MDB_FIRST); rc == 0 && out.size() < max;
       rc = cur.Get(&k, &v, MDB_NEXT)) {
    nlohmann::json j = nlohmann::json::parse(Str(v), nullptr, false);
    out.push_back({SeqFromKey(k), j.is_discarded() ? nlohmann::json() : j});
  }
  return out;
}

Status LmdbStore::AckOutbox(uint64_t seq) {
  Txn txn(env_, true, &synced_commits_);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  std::string key = SeqKey(seq);
  MDB_val k = Val(key);
  int rc = mdb_del(txn.get(), outbox_, &k, nullptr);
  if (rc != 0 && rc != MDB_NOTFOUND) return LmdbError("mdb_del", rc);
  rc = txn.Commit();
  if (rc != 0) return LmdbError("mdb_txn_commit", rc);
  return Status::Ok();
}

StatusOr<size_t> LmdbStore::OutboxSize() {
  Txn txn(env_, false);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  MDB_stat st;
  int rc = mdb_stat(txn.get(), outbox_, &st);
  if (rc != 0) return LmdbError("mdb_stat", rc);
  return static_cast<size_t>(st.ms_entries);
}

Status LmdbStore::CreateInstance(const nlohmann::json& snapshot, const std::vector<Event>& events,
                                 const Submission* submission,
                                 const std::vector<nlohmann::json>& outbox, const Lease* lease,
                                 const std::vector<OperationRecord>& operations) {
  const std::string id = snapshot.at("id").get<std::string>();
  auto record = RecordOf(snapshot);
  if (!record.ok()) return record.status();
  CommitRequest r{WriteKind::kCreate, id,         0,       &*record, &events,
                  &operations,        submission, &outbox, lease};
  r.created = &snapshot;
  SAGAD_RETURN_IF_ERROR(Prepare(r));
  return group_.Commit(r);
}

void LmdbStore::CreateInstanceAsync(std::shared_ptr<const CreationWrite> w,
                                    std::function<void(Status)> done) {
  struct Kept {
    std::shared_ptr<const CreationWrite> w;
    SnapshotRecord record;
  };
  auto record = RecordOf(w->snapshot);
  if (!record.ok()) {
    done(record.status());
    return;
  }
  auto kept = std::make_shared<Kept>(Kept{std::move(w), std::move(*record)});
  const CreationWrite& c = *kept->w;
  auto r = std::make_unique<CommitRequest>(
      WriteKind::kCreate, kept->record.id, 0, &kept->record, &c.events, &c.operations,
      c.submission ? &*c.submission : nullptr, &c.outbox, c.lease ? &*c.lease : nullptr);
  r->created = &c.snapshot;
  r->keep = kept;
  QueueAsync(std::move(r), std::move(done));
}

// Version, saga and status of `id`: from its `active` entry (`entry`, may be
// null) when that is a full one, else (a finished instance, or an entry
// written before the index held more than the id) from its snapshot.
StatusOr<ActiveInstance> LmdbStore::IndexedState(MDB_txn* txn, const std::string& id,
                                                 const MDB_val* entry) {
  ActiveInstance a;
  a.id = id;
  if (entry && entry->mv_size > 8) {
    const char* p = static_cast<const char*>(entry->mv_data);
    const char* nul = static_cast<const char*>(std::memchr(p + 8, '\0', entry->mv_size - 8));
    if (nul) {
      a.version = SeqFromKey(*entry);
      a.saga.assign(p + 8, nul);
      a.status.assign(nul + 1, p + entry->mv_size);
      return a;
    }
  }
  auto snap = GetJson(txn, instances_, id);
  if (!snap.ok()) return snap.status();
  a.version = snap->value("version", uint64_t(0));
  a.saga = snap->value("saga", "");
  a.status = snap->value("status", "");
  return a;
}

// The stored version of an instance (the compare-and-swap's).
StatusOr<uint64_t> LmdbStore::StoredVersion(MDB_txn* txn, const std::string& id) {
  MDB_val k = Val(id), v;
  int rc = mdb_get(txn, active_, &k, &v);
  if (rc != 0 && rc != MDB_NOTFOUND) return LmdbError("mdb_get", rc);
  auto a = IndexedState(txn, id, rc == 0 ? &v : nullptr);
  if (!a.ok()) return a.status();
  return a->version;
}

// Checks r (reads only: the compare-and-swap, the lease, the keys that must
// be new); a refusal is r's own result and leaves the transaction untouched.
Status LmdbStore::Check(MDB_txn* txn, CommitRequest& r) {
  const std::string& id = r.id;
  if (r.kind == WriteKind::kOther) return r.check ? r.check(txn) : Status::Ok();
  if (r.kind == WriteKind::kSubmissionResponse) {
    auto cur = GetJson(txn, submissions_, id);
    if (!cur.ok()) return cur.status();
    Submission s = Submission::FromJson(*cur);
    if (s.response_status != 0) return Status::Ok();  // the first response stands
    s.response_status = r.submission->response_status;
    s.response = r.submission->response;
    r.record = s.ToJson();
    return Status::Ok();
  }
  if (r.kind == WriteKind::kCreate) {
    MDB_val k, existing;
    if (r.submission) {
      k = Val(r.submission->key);
      int rc = mdb_get(txn, submissions_, &k, &existing);
      if (rc == 0) return AlreadyExists("key exists: " + r.submission->key);
      if (rc != MDB_NOTFOUND) return LmdbError("mdb_get", rc);
    }
    k = Val(id);
    int rc = mdb_get(txn, instances_, &k, &existing);
    if (rc == 0) return AlreadyExists("instance " + id + " exists");
    if (rc != MDB_NOTFOUND) return LmdbError("mdb_get", rc);
    return Status::Ok();
  }
  auto version = StoredVersion(txn, id);
  if (!version.ok()) return version.status();
  uint64_t stored = *version;
  if (stored != r.expected_version)
    return Aborted("instance " + id + " changed: version " + std::to_string(stored) +
                   ", expected " + std::to_string(r.expected_version));
  if (r.snapshot->version != r.expected_version + 1)
    return Internal("snapshot version must be expected_version + 1");
  if (r.lease) {
    auto held = GetJson(txn, leases_, id);
    Lease owner = held.ok() ? Lease::FromJson(*held) : Lease{};
    if (owner.owner != r.lease->owner || owner.generation != r.lease->generation)
      return LeaseLost("lease lost: instance " + id + " is owned by '" + owner.owner +
                       "' generation " + std::to_string(owner.generation));
  }
  return Status::Ok();
}

// Writes a checked r. A failure here is the environment's (disk, map full)
// and leaves the transaction unusable.
Status LmdbStore::Write(MDB_txn* txn, const CommitRequest& r) {
  const std::string& id = r.id;
  if (r.kind == WriteKind::kOther) return r.apply(txn);
  if (r.kind == WriteKind::kSubmissionResponse)
    return r.record.is_null() ? Status::Ok() : PutJson(txn, submissions_, id, r.record);
  const bool create = r.kind == WriteKind::kCreate;
  if (create && r.submission) {
    SAGAD_RETURN_IF_ERROR(PutJson(txn, submissions_, r.submission->key, r.submission->ToJson()));
    MDB_val k = Val(id), v = Val(r.submission->key);
    int rc = mdb_put(txn, sub_index_, &k, &v, 0);
    if (rc != 0) return LmdbError("mdb_put", rc);
  }
  if (create && r.lease) SAGAD_RETURN_IF_ERROR(PutJson(txn, leases_, id, r.lease->ToJson()));
  if (!create && IsTerminalName(r.snapshot->status)) {
    MDB_val k = Val(id);
    int rc = mdb_del(txn, leases_, &k, nullptr);
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbError("mdb_del", rc);
  }
  SAGAD_RETURN_IF_ERROR(PutSnapshot(txn, id, *r.snapshot));
  if (create && r.created) SAGAD_RETURN_IF_ERROR(PutAttributeKeys(txn, id, *r.created, true));
  for (const auto& [key, text] : r.texts.events)
    SAGAD_RETURN_IF_ERROR(PutText(txn, events_, key, text, MDB_NOOVERWRITE));
  for (const auto& [key, text] : r.texts.operations)
    SAGAD_RETURN_IF_ERROR(PutText(txn, operations_, key, text));
  return AppendOutbox(txn, r.texts.outbox);
}

Status LmdbStore::Prepare(CommitRequest& r) {
  try {
    for (const Event& e : *r.events)
      r.texts.events.emplace_back(EventKey(r.id, e.seq), DumpJson(e.ToJson()));
    if (r.operations)
      for (const OperationRecord& op : *r.operations)
        r.texts.operations.emplace_back(op.key, DumpJson(op.ToJson()));
    for (const auto& m : *r.outbox) r.texts.outbox.push_back(DumpJson(m));
  } catch (const std::exception& e) {
    return Internal(std::string("write refused: ") + e.what());
  }
  return Status::Ok();
}

Status LmdbStore::Commit(const std::string& id, uint64_t expected_version,
                         const nlohmann::json& snapshot, const std::vector<Event>& events,
                         const std::vector<OperationRecord>& operations,
                         const std::vector<nlohmann::json>& outbox, const Lease* lease) {
  auto record = RecordOf(snapshot);
  if (!record.ok()) return record.status();
  CommitRequest r{WriteKind::kTransition,
                  id,
                  expected_version,
                  &*record,
                  &events,
                  &operations,
                  nullptr,
                  &outbox,
                  lease};
  SAGAD_RETURN_IF_ERROR(Prepare(r));
  return group_.Commit(r);
}

StatusOr<Lease> LmdbStore::TakeLease(MDB_txn* txn, const std::string& id, const std::string& owner,
                                     int64_t now_ms, int64_t ttl_ms,
                                     const std::string& successor_of) {
  auto held = GetJson(txn, leases_, id);
  if (!held.ok() && held.status().code() != StatusCode::kNotFound) return held.status();
  auto l = TakeLeaseRule(id, held.ok() ? Lease::FromJson(*held) : Lease{}, owner, now_ms, ttl_ms,
                         successor_of);
  if (!l.ok()) return l.status();
  SAGAD_RETURN_IF_ERROR(PutJson(txn, leases_, id, l->ToJson()));
  return l;
}

StatusOr<Lease> LmdbStore::AcquireLease(const std::string& id, const std::string& owner,
                                        const Clock& clock, int64_t ttl_ms,
                                        const std::string& successor_of) {
  Txn txn(env_, true, &synced_commits_);  // waits for the writer lock
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  auto l = TakeLease(txn.get(), id, owner, clock.NowMillis(), ttl_ms, successor_of);
  if (!l.ok()) return l.status();
  int rc = txn.Commit();
  if (rc != 0) return LmdbError("mdb_txn_commit", rc);
  return l;
}

StatusOr<std::map<std::string, Lease>> LmdbStore::AcquireLeases(const std::vector<std::string>& ids,
                                                                const std::string& owner,
                                                                const Clock& clock, int64_t ttl_ms,
                                                                const std::string& successor_of) {
  Txn txn(env_, true, &synced_commits_);  // waits for the writer lock
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  const int64_t now_ms = clock.NowMillis();
  std::map<std::string, Lease> taken;
  for (const auto& id : ids) {
    auto l = TakeLease(txn.get(), id, owner, now_ms, ttl_ms, successor_of);
    if (l.ok())
      taken.emplace(id, *l);
    else if (l.status().code() != StatusCode::kLeaseLost)
      return l.status();
  }
  int rc = txn.Commit();
  if (rc != 0) return LmdbError("mdb_txn_commit", rc);
  return taken;
}

StatusOr<std::vector<std::string>> LmdbStore::RenewLeases(const std::string& owner,
                                                          const std::vector<std::string>& ids,
                                                          const Clock& clock, int64_t ttl_ms) {
  Txn txn(env_, true, &synced_commits_);  // waits for the writer lock
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  const int64_t now_ms = clock.NowMillis();
  std::vector<std::string> lost;
  for (const auto& id : ids) {
    auto held = GetJson(txn.get(), leases_, id);
    Lease l = held.ok() ? Lease::FromJson(*held) : Lease{};
    if (l.owner != owner) {
      lost.push_back(id);
      continue;
    }
    l.expires_at = now_ms + ttl_ms;
    SAGAD_RETURN_IF_ERROR(PutJson(txn.get(), leases_, id, l.ToJson()));
  }
  int rc = txn.Commit();
  if (rc != 0) return LmdbError("mdb_txn_commit", rc);
  return lost;
}

}  // namespace sagad
