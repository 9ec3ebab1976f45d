// LmdbStore: which downstream services an operator paused (one record in
// the meta database, a sorted JSON array of names, and beside it one JSON
// object of their notes: who, why, since when), and the saga
// definitions deployed over the API (one meta record each, keyed
// "definition" NUL name NUL version, the version as 10 digits).
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "coordinator/store/lmdb/lmdb_util.h"

namespace sagad {

using namespace lmdb_util;

namespace {
const char kPausedKey[] = "paused_services";
const char kNotesKey[] = "paused_notes";

std::string DefinitionPrefix() { return std::string("definition") + '\0'; }

std::string DefinitionKey(const std::string& name, int version) {
  char v[16];
  std::snprintf(v, sizeof v, "%010d", version);
  return DefinitionPrefix() + name + '\0' + v;
}
}  // namespace

StatusOr<std::vector<std::string>> LmdbStore::PausedServices() {
  Txn txn(env_, false);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  auto j = GetJson(txn.get(), meta_, kPausedKey);
  if (j.status().code() == StatusCode::kNotFound) return std::vector<std::string>{};
  if (!j.ok()) return j.status();
  if (!j->is_array()) return Internal("corrupt record under key paused_services");
  std::vector<std::string> out;
  for (const auto& n : *j)
    if (n.is_string()) out.push_back(n.get<std::string>());
  return out;
}

StatusOr<nlohmann::json> LmdbStore::PauseNotes() {
  Txn txn(env_, false);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  auto j = GetJson(txn.get(), meta_, kNotesKey);
  if (j.status().code() == StatusCode::kNotFound) return nlohmann::json::object();
  if (!j.ok()) return j.status();
  if (!j->is_object()) return Internal("corrupt record under key paused_notes");
  return *j;
}

Status LmdbStore::ApplyPause(MDB_txn* txn, const std::string& service, bool paused,
                             const nlohmann::json& note) {
  auto j = GetJson(txn, meta_, kPausedKey);
  if (!j.ok() && j.status().code() != StatusCode::kNotFound) return j.status();
  std::vector<std::string> names;
  if (j.ok() && j->is_array())
    for (const auto& n : *j)
      if (n.is_string()) names.push_back(n.get<std::string>());
  auto it = std::find(names.begin(), names.end(), service);
  if (paused == (it != names.end())) return Status::Ok();  // already so
  if (paused)
    names.push_back(service);
  else
    names.erase(it);
  std::sort(names.begin(), names.end());
  SAGAD_RETURN_IF_ERROR(PutJson(txn, meta_, kPausedKey, names));
  auto notes = GetJson(txn, meta_, kNotesKey);
  if (!notes.ok() && notes.status().code() != StatusCode::kNotFound) return notes.status();
  nlohmann::json kept = notes.ok() && notes->is_object() ? *notes : nlohmann::json::object();
  if (paused && note.is_object())
    kept[service] = note;
  else
    kept.erase(service);
  return PutJson(txn, meta_, kNotesKey, kept);
}

Status LmdbStore::SetServicePaused(const std::string& service, bool paused,
                                   const nlohmann::json& note) {
  Txn txn(env_, true, &synced_commits_);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  SAGAD_RETURN_IF_ERROR(ApplyPause(txn.get(), service, paused, note));
  int rc = txn.Commit();
  return rc == 0 ? Status::Ok() : LmdbError("mdb_txn_commit", rc);
}

void LmdbStore::SetServicePausedAsync(const std::string& service, bool paused,
                                      const nlohmann::json& note,
                                      std::function<void(Status)> done) {
  QueueOther(
      nullptr,
      [this, service, paused, note](MDB_txn* txn) {
        return ApplyPause(txn, service, paused, note);
      },
      std::move(done));
}

StatusOr<bool> LmdbStore::NewDefinition(MDB_txn* txn, const std::string& name, int version,
                                        const nlohmann::json& body) {
  auto held = GetJson(txn, meta_, DefinitionKey(name, version));
  if (held.ok()) {
    if (*held == body) return false;
    return AlreadyExists("saga '" + name + "' version " + std::to_string(version) +
                         " is deployed with another definition");
  }
  if (held.status().code() != StatusCode::kNotFound) return held.status();
  return true;
}

StatusOr<bool> LmdbStore::PutDefinition(const std::string& name, int version,
                                        const nlohmann::json& body) {
  Txn txn(env_, true, &synced_commits_);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  auto fresh = NewDefinition(txn.get(), name, version, body);
  if (!fresh.ok() || !*fresh) return fresh;
  SAGAD_RETURN_IF_ERROR(PutJson(txn.get(), meta_, DefinitionKey(name, version), body));
  int rc = txn.Commit();
  if (rc != 0) return LmdbError("mdb_txn_commit", rc);
  return true;
}

void LmdbStore::PutDefinitionAsync(const std::string& name, int version, const nlohmann::json& body,
                                   std::function<void(StatusOr<bool>)> done) {
  auto fresh = std::make_shared<bool>(false);
  QueueOther(
      [this, name, version, body, fresh](MDB_txn* txn) -> Status {
        auto f = NewDefinition(txn, name, version, body);
        if (!f.ok()) return f.status();
        *fresh = *f;
        return Status::Ok();
      },
      [this, name, version, body, fresh](MDB_txn* txn) {
        return *fresh ? PutJson(txn, meta_, DefinitionKey(name, version), body) : Status::Ok();
      },
      [fresh, done = std::move(done)](Status s) {
        if (!s.ok()) return done(s);
        done(*fresh);
      });
}

void LmdbStore::QueueOther(std::function<Status(MDB_txn*)> check,
                           std::function<Status(MDB_txn*)> apply,
                           std::function<void(Status)> done) {
  static const std::string kNoInstance;
  auto r = std::make_unique<CommitRequest>(WriteKind::kOther, kNoInstance, 0, nullptr, nullptr,
                                           nullptr, nullptr, nullptr, nullptr);
  r->check = std::move(check);
  r->apply = std::move(apply);
  r->then = std::move(done);
  group_.CommitAsync(std::move(r));
}

StatusOr<std::vector<StoredDefinition>> LmdbStore::ListDefinitions() {
  Txn txn(env_, false);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  Cursor cur(txn.get(), meta_);
  if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
  const std::string prefix = DefinitionPrefix();
  std::vector<StoredDefinition> out;
  MDB_val k = Val(prefix), v;
  int rc = cur.Get(&k, &v, MDB_SET_RANGE);
  for (; rc == 0; rc = cur.Get(&k, &v, MDB_NEXT)) {
    const std::string key = Str(k);
    if (key.compare(0, prefix.size(), prefix) != 0) break;
    size_t sep = key.find('\0', prefix.size());
    if (sep == std::string::npos) continue;
    auto body = nlohmann::json::parse(Str(v), nullptr, false);
    if (body.is_discarded())
      return Internal("corrupt definition record " +
                      key.substr(prefix.size(), sep - prefix.size()));
    out.push_back({key.substr(prefix.size(), sep - prefix.size()), std::atoi(key.c_str() + sep + 1),
                   std::move(body)});
  }
  if (rc != 0 && rc != MDB_NOTFOUND) return LmdbError("mdb_cursor_get", rc);
  return out;
}

}  // namespace sagad
