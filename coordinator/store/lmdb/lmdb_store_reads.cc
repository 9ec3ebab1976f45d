// LmdbStore: reads, listing and retention (read transactions, and the
// sweeper's short write transactions).
#include <chrono>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "coordinator/store/lmdb/lmdb_util.h"
#include "sagas/step_key.h"

namespace sagad {

using namespace lmdb_util;

StatusOr<nlohmann::json> LmdbStore::ReadJson(MDB_dbi dbi, const std::string& key) {
  Txn txn(env_, false);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  return GetJson(txn.get(), dbi, key);
}

StatusOr<Lease> LmdbStore::GetLease(const std::string& id) {
  auto held = ReadJson(leases_, id);
  if (!held.ok()) return held.status();
  return Lease::FromJson(*held);
}

StatusOr<nlohmann::json> LmdbStore::GetInstance(const std::string& id) {
  auto r = ReadJson(instances_, id);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) return InstanceNotFound(id);
  return r;
}

StatusOr<std::vector<Event>> LmdbStore::GetEvents(const std::string& id) {
  Txn txn(env_, false);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  Cursor cur(txn.get(), events_);
  if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
  int rc = 0;
  std::vector<Event> out;
  std::string prefix = id;
  prefix.push_back('\0');
  MDB_val k = Val(prefix), v;
  for (rc = cur.Get(&k, &v, MDB_SET_RANGE); rc == 0; rc = cur.Get(&k, &v, MDB_NEXT)) {
    std::string key = Str(k);
    if (key.compare(0, prefix.size(), prefix) != 0) break;
    auto j = nlohmann::json::parse(Str(v), nullptr, false);
    auto e = j.is_discarded() ? StatusOr<Event>(Internal("corrupt event")) : Event::FromJson(j);
    if (!e.ok()) {
      return e.status();
    }
    out.push_back(std::move(*e));
  }
  return out;
}

StatusOr<OperationRecord> LmdbStore::GetOperation(const std::string& key) {
  auto r = ReadJson(operations_, key);
  if (!r.ok()) return r.status();
  return OperationRecord::FromJson(*r);
}

StatusOr<Submission> LmdbStore::GetSubmission(const std::string& key) {
  auto r = ReadJson(submissions_, key);
  if (!r.ok()) return r.status();
  return Submission::FromJson(*r);
}

Status LmdbStore::SetSubmissionResponse(const std::string& key, int status,
                                        const nlohmann::json& response) {
  Submission answer;
  answer.key = key;
  answer.response_status = status;
  answer.response = response;
  CommitRequest r{
      WriteKind::kSubmissionResponse, key, 0, nullptr, nullptr, nullptr, &answer, nullptr, nullptr};
  return group_.Commit(r);  // shares the fsync of the transitions around it
}

void LmdbStore::SetSubmissionResponseAsync(const std::string& key, int status,
                                           const nlohmann::json& response,
                                           std::function<void(Status)> done) {
  auto answer = std::make_shared<Submission>();
  answer->key = key;
  answer->response_status = status;
  answer->response = response;
  auto r = std::make_unique<CommitRequest>(WriteKind::kSubmissionResponse, answer->key, 0, nullptr,
                                           nullptr, nullptr, answer.get(), nullptr, nullptr);
  r->keep = std::move(answer);
  r->then = std::move(done);
  group_.CommitAsync(std::move(r));
}

namespace {

// The index a filter is answered from (LmdbStore::PutIndexes): the code and
// value of its most selective indexed condition, or code 0 for none.
std::pair<char, std::string> IndexOf(const InstanceFilter& f) {
  if (!f.waiting.empty()) return {'w', f.waiting};
  if (!f.status.empty()) return {'s', f.status};
  if (!f.owner.empty()) return {'o', f.owner};
  if (!f.saga.empty()) return {'g', f.saga};
  return {0, ""};
}

// What the stored text of a snapshot that matches `f`'s input condition
// must contain: the value as it is written in JSON, when that is the value
// itself (printable ASCII without a quote or a backslash; "" otherwise:
// every candidate is parsed).
std::string PlainNeedle(const InstanceFilter& f) {
  if (f.input_field.empty() || f.input_value.empty()) return "";
  for (unsigned char c : f.input_value)
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return "";
  return f.input_value;
}

}  // namespace

// Newest first, from the cursor (strictly older). With an indexed condition
// only the instances that have its value are examined; in every case at
// most kMaxExaminedPerList snapshots are read per request: a page that ends
// there early carries the cursor to go on from (a list is short, never
// silently incomplete).
StatusOr<InstancePage> LmdbStore::ListInstances(const InstanceFilter& filter, size_t limit,
                                                const std::string& cursor) {
  if (!filter.idempotency_key.empty()) return ListByKey(filter, cursor);
  Txn txn(env_, false);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  // A declared attribute's entries first (the most selective), else the
  // status, saga, waiting or owner index, else every instance.
  auto attribute = AttributeIndexOf(txn.get(), filter);
  if (!attribute.ok()) return attribute.status();
  auto [code, value] = IndexOf(filter);
  std::string prefix;
  if (!attribute->empty()) {
    prefix = *attribute;
    code = prefix[0];
  } else if (code) {
    prefix = IndexPrefix(code, value);
  }
  Cursor cur(txn.get(), code ? by_field_ : instances_);
  if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
  // Start past the newest candidate (or at the cursor, or at the creation
  // time's upper bound: ids sort by creation), then step back.
  std::string upper = cursor.empty() ? std::string(1, '\xff') : cursor;
  if (filter.created_before > 0) upper = std::min(upper, IdFloor(filter.created_before));
  // Below this id nothing was created after created_after.
  const std::string lower = filter.created_after > 0 ? IdFloor(filter.created_after + 1) : "";
  std::string start = prefix + upper;
  MDB_val k = Val(start), v;
  int rc = cur.Get(&k, &v, MDB_SET_RANGE);
  if (rc == MDB_NOTFOUND)
    rc = cur.Get(&k, &v, MDB_LAST);
  else if (rc == 0)
    rc = cur.Get(&k, &v, MDB_PREV);  // strictly older
  const std::string needle = PlainNeedle(filter);
  InstancePage page;
  // input.* and metadata.*: a bounded scan unless a declared attribute's
  page.indexed = filter.input_field.empty() || !attribute->empty();
  std::string last;
  for (size_t examined = 0; rc == 0; rc = cur.Get(&k, &v, MDB_PREV)) {
    std::string key = Str(k);
    if (code && key.compare(0, prefix.size(), prefix) != 0) break;  // past the value's entries
    if (!lower.empty() && key.compare(prefix.size(), std::string::npos, lower) < 0) break;
    if (page.instances.size() == limit || examined == kMaxExaminedPerList) {
      page.next_cursor = last;
      break;
    }
    ++examined;
    last = code ? key.substr(prefix.size()) : key;
    std::string text;
    if (code) {
      auto t = ReadString(txn.get(), instances_, last);
      if (!t.ok()) continue;  // an index entry without its instance: skipped
      text = std::move(*t);
    } else {
      text = Str(v);
    }
    // A snapshot whose text lacks the searched value cannot match: skipped
    // unparsed (most of a bounded scan's cost was parsing).
    if (!needle.empty() && text.find(needle) == std::string::npos) continue;
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !Matches(filter, j)) continue;
    page.instances.push_back(std::move(j));
  }
  if (rc != 0 && rc != MDB_NOTFOUND) return LmdbError("mdb_cursor_get", rc);
  return page;
}

// The one instance a submission key created, if it passes the rest of the
// filter (and lies past the cursor).
StatusOr<InstancePage> LmdbStore::ListByKey(const InstanceFilter& filter,
                                            const std::string& cursor) {
  InstancePage page;
  auto sub = GetSubmission(filter.idempotency_key);
  if (sub.status().code() == StatusCode::kNotFound) return page;
  if (!sub.ok()) return sub.status();
  if (!cursor.empty() && sub->instance_id >= cursor) return page;
  auto j = GetInstance(sub->instance_id);
  if (j.status().code() == StatusCode::kNotFound) return page;
  if (!j.ok()) return j.status();
  if (Matches(filter, *j)) page.instances.push_back(std::move(*j));
  return page;
}

uint64_t LmdbStore::SyncedCommits() const { return synced_commits_; }

// Which: ids begin with their creation time (12 hex digits of ms), so the
// scan goes from the oldest and stops at the first instance created after
// the cutoff (it cannot have finished before it). Unfinished ones (in the
// `active` index) are skipped without reading their snapshot.
Status LmdbStore::FindFinished(MDB_txn* txn, int64_t finished_before_ms, size_t max,
                               std::vector<std::pair<std::string, nlohmann::json>>* due) {
  Cursor cur(txn, instances_);
  if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
  MDB_val k, v;
  int rc = cur.Get(&k, &v, MDB_FIRST);
  for (size_t scanned = 0; rc == 0 && due->size() < max && scanned < 100 * max;
       rc = cur.Get(&k, &v, MDB_NEXT), ++scanned) {
    const std::string id = Str(k);
    char* end = nullptr;
    long long created =
        id.size() > 12 && id[12] == '-' ? std::strtoll(id.substr(0, 12).c_str(), &end, 16) : -1;
    if (created > finished_before_ms) break;
    MDB_val ak = Val(id), av;
    if (mdb_get(txn, active_, &ak, &av) == 0) continue;  // unfinished
    auto snap = nlohmann::json::parse(Str(v), nullptr, false);
    if (snap.is_object() && IsTerminalName(snap.value("status", "")) &&
        snap.value("updated_at", int64_t(0)) < finished_before_ms)
      due->emplace_back(id, std::move(snap));
  }
  if (rc != 0 && rc != MDB_NOTFOUND) return LmdbError("mdb_cursor_get", rc);
  return Status::Ok();
}

// Every record of one finished instance: snapshot, indexes, lease,
// operations, submission key, events.
Status LmdbStore::DeleteRecords(MDB_txn* txn, const std::string& id, const nlohmann::json& snap) {
  auto del = [&](MDB_dbi dbi, const std::string& key) -> Status {
    MDB_val k = Val(key);
    int rc = mdb_del(txn, dbi, &k, nullptr);
    return rc == 0 || rc == MDB_NOTFOUND ? Status::Ok() : LmdbError("mdb_del", rc);
  };
  SAGAD_RETURN_IF_ERROR(del(instances_, id));
  SAGAD_RETURN_IF_ERROR(PutIndexes(txn, id, nullptr));
  SAGAD_RETURN_IF_ERROR(PutAttributeKeys(txn, id, snap, false));
  SAGAD_RETURN_IF_ERROR(del(active_, id));
  SAGAD_RETURN_IF_ERROR(del(leases_, id));
  for (const auto& st : snap.value("steps", nlohmann::json::array())) {
    std::string step = st.value("name", "");
    SAGAD_RETURN_IF_ERROR(del(operations_, StepKey(id, step)));
    SAGAD_RETURN_IF_ERROR(del(operations_, CompensationKey(id, step)));
  }
  auto key = ReadString(txn, sub_index_, id);
  if (key.ok()) {
    SAGAD_RETURN_IF_ERROR(del(submissions_, *key));
    SAGAD_RETURN_IF_ERROR(del(sub_index_, id));
  }
  Cursor cur(txn, events_);  // the events: id NUL seq
  if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
  std::string prefix = id;
  prefix.push_back('\0');
  std::vector<std::string> keys;
  MDB_val k = Val(prefix), v;
  for (int rc = cur.Get(&k, &v, MDB_SET_RANGE); rc == 0; rc = cur.Get(&k, &v, MDB_NEXT)) {
    std::string ek = Str(k);
    if (ek.compare(0, prefix.size(), prefix) != 0) break;
    keys.push_back(std::move(ek));
  }
  for (const auto& ek : keys) SAGAD_RETURN_IF_ERROR(del(events_, ek));
  return Status::Ok();
}

StatusOr<std::vector<std::string>> LmdbStore::DeleteFinished(int64_t finished_before_ms,
                                                             size_t max) {
  Txn txn(env_, true, &synced_commits_);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  std::vector<std::pair<std::string, nlohmann::json>> due;
  SAGAD_RETURN_IF_ERROR(FindFinished(txn.get(), finished_before_ms, max, &due));
  std::vector<std::string> ids;
  for (const auto& [id, snap] : due) {
    SAGAD_RETURN_IF_ERROR(DeleteRecords(txn.get(), id, snap));
    ids.push_back(id);
  }
  if (ids.empty()) return ids;  // nothing written: the transaction aborts
  int rc = txn.Commit();
  if (rc != 0) return LmdbError("mdb_txn_commit", rc);
  return ids;
}

Status LmdbStore::CheckWritable() {
  if (!full_) return Status::Ok();
  Status failure;
  Probe probe = ProbeRoom(&failure);
  if (probe == Probe::kRoom) {
    full_ = false;
    return Status::Ok();
  }
  if (probe == Probe::kFailed) return failure;  // the probe's own failure (an I/O error)
  return Unavailable(
      "the store is full or failing: the last write failed (disk space, "
      "lmdb_map_size_mb, or an I/O error)");
}

// Commits kProbeBytes under a meta key, then deletes it: room for that (far
// more than a submission writes, page splits included) means room for new
// work. Once a second at most, so a busy /readyz does not add commits.
LmdbStore::Probe LmdbStore::ProbeRoom(Status* failure) {
  constexpr size_t kProbeBytes = 64 * 1024;
  const std::string key = "readiness_probe";
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count();
  int64_t last = last_probe_ms_.load();
  if (now - last < 1000 || !last_probe_ms_.compare_exchange_strong(last, now)) {
    *failure = Unavailable("probed less than a second ago");
    return Probe::kSkipped;
  }
  auto fail = [failure](const char* what, int rc) {
    *failure = LmdbError(what, rc);
    return IsFullRc(rc) ? Probe::kFull : Probe::kFailed;
  };
  std::string room(kProbeBytes, '\0');
  {
    Txn txn(env_, true);
    if (txn.rc() != 0) return fail("mdb_txn_begin", txn.rc());
    MDB_val k = Val(key), v = Val(room);
    int rc = mdb_put(txn.get(), meta_, &k, &v, 0);
    if (rc != 0) return fail("mdb_put", rc);
    rc = txn.Commit();
    if (rc != 0) return fail("mdb_txn_commit", rc);
  }
  Txn txn(env_, true);
  if (txn.rc() != 0) return fail("mdb_txn_begin", txn.rc());
  MDB_val k = Val(key);
  int rc = mdb_del(txn.get(), meta_, &k, nullptr);
  if (rc != 0) return fail("mdb_del", rc);
  rc = txn.Commit();
  return rc == 0 ? Probe::kRoom : fail("mdb_txn_commit", rc);
}

StatusOr<std::vector<ActiveInstance>> LmdbStore::ListActive() {
  Txn txn(env_, false);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  Cursor cur(txn.get(), active_);
  if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
  int rc = 0;
  std::vector<ActiveInstance> out;
  MDB_val k, v;
  for (rc = cur.Get(&k, &v, MDB_FIRST); rc == 0; rc = cur.Get(&k, &v, MDB_NEXT)) {
    auto a = IndexedState(txn.get(), Str(k), &v);
    if (a.ok()) out.push_back(std::move(*a));
  }
  return out;
}

}  // namespace sagad
