// LmdbStore: opening an environment (read-write with its schema stamp and
// migration, or read-only), the checks made before any page is read, and
// closing it.
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "coordinator/store/lmdb/lmdb_util.h"
#include "util/json_limits.h"
#include "util/log.h"

namespace sagad {
using namespace lmdb_util;

std::vector<std::pair<const char*, MDB_dbi*>> LmdbStore::Databases() {
  return {{"instances", &instances_},     {"events", &events_},  {"operations", &operations_},
          {"submissions", &submissions_}, {"active", &active_},  {"meta", &meta_},
          {"outbox", &outbox_},           {"leases", &leases_},  {"sub_index", &sub_index_},
          {"by_field", &by_field_},       {"indexed", &indexed_}};
}

// A data.mdb shorter than its meta page says (a truncated copy, a partial
// restore) would fault (SIGBUS) on the first page past its end: checked
// after mdb_env_open, which reads only the two meta pages, before any
// transaction touches another page.
Status LmdbStore::CheckSize(const std::string& dir) {
  MDB_envinfo info;
  MDB_stat stat;
  int rc = mdb_env_info(env_, &info);
  if (rc == 0) rc = mdb_env_stat(env_, &stat);
  if (rc != 0) return LmdbError("mdb_env_info", rc);
  std::string file = dir + "/data.mdb";
  struct stat st;
  if (::stat(file.c_str(), &st) != 0)
    return Internal("cannot stat " + file + ": " + std::strerror(errno));
  uint64_t needed = (uint64_t(info.me_last_pgno) + 1) * stat.ms_psize;
  if (uint64_t(st.st_size) < needed)
    return Internal(file + " is truncated: " + std::to_string(st.st_size) +
                    " bytes, but its last transaction used " + std::to_string(needed) +
                    "; restore the data dir from a backup (refusing to open it)");
  return Status::Ok();
}

StatusOr<std::unique_ptr<LmdbStore>> LmdbStore::Open(const std::string& dir,
                                                     size_t map_size_bytes) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Internal("cannot create data dir " + dir + ": " + std::strerror(errno));
  std::unique_ptr<LmdbStore> s(new LmdbStore());
  int rc = mdb_env_create(&s->env_);
  if (rc != 0) return LmdbError("mdb_env_create", rc);
  mdb_env_set_maxdbs(s->env_, 16);
  mdb_env_set_maxreaders(s->env_, 1024);
  mdb_env_set_mapsize(s->env_, map_size_bytes);
  rc = mdb_env_open(s->env_, dir.c_str(), MDB_NOTLS, 0644);
  if (rc != 0) return Internal("cannot open LMDB data dir " + dir + ": " + mdb_strerror(rc));
  SAGAD_RETURN_IF_ERROR(s->CheckSize(dir));
  Txn txn(s->env_, true);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  for (auto [name, dbi] : s->Databases()) {
    rc = mdb_dbi_open(txn.get(), name, MDB_CREATE, dbi);
    if (rc != 0) return LmdbError("mdb_dbi_open", rc);
  }
  auto meta = GetJson(txn.get(), s->meta_, "schema_version");
  if (!meta.ok() && meta.status().code() != StatusCode::kNotFound) return meta.status();
  int v = meta.ok() ? meta->get<int>() : -1;
  if (v > kStoreSchemaVersion)
    return FailedPrecondition("data dir " + dir + " has schema_version " + std::to_string(v) +
                              ", newer than this sagad supports (" +
                              std::to_string(kStoreSchemaVersion) + "); refusing to open");
  if (v == 0) {
    SAGAD_RETURN_IF_ERROR(s->MigrateV0ToV1(txn.get()));
    v = 1;
  }
  if (v == 1) {
    SAGAD_RETURN_IF_ERROR(s->BuildIndexes(txn.get()));
    v = 2;
  }
  if (v < 0) v = kStoreSchemaVersion;  // a new data dir
  SAGAD_RETURN_IF_ERROR(PutJson(txn.get(), s->meta_, "schema_version", v));
  rc = txn.Commit();
  if (rc != 0) return LmdbError("mdb_txn_commit", rc);
  return s;
}

// Schema 0 (the first release) had no index of unfinished instances and no
// schema_version inside records: build the index, stamp every snapshot.
Status LmdbStore::MigrateV0ToV1(MDB_txn* txn) {
  Cursor cur(txn, instances_);
  if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
  int rc = 0;
  std::vector<std::pair<std::string, nlohmann::json>> snaps;
  MDB_val k, v;
  for (rc = cur.Get(&k, &v, MDB_FIRST); rc == 0; rc = cur.Get(&k, &v, MDB_NEXT)) {
    auto j = nlohmann::json::parse(Str(v), nullptr, false);
    if (j.is_discarded()) {
      return Internal("schema 0 migration: corrupt instance record " + Str(k));
    }
    snaps.emplace_back(Str(k), std::move(j));
  }
  for (auto& [id, snap] : snaps) {
    snap["schema_version"] = 1;
    SAGAD_RETURN_IF_ERROR(PutSnapshot(txn, id, SnapshotRecord::FromJson(snap)));
  }
  return Status::Ok();
}

Status LmdbStore::BuildIndexes(MDB_txn* txn) {
  Cursor cur(txn, instances_);
  if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
  MDB_val k, v;
  int rc = 0;
  size_t n = 0;
  for (rc = cur.Get(&k, &v, MDB_FIRST); rc == 0; rc = cur.Get(&k, &v, MDB_NEXT)) {
    auto j = nlohmann::json::parse(Str(v), nullptr, false);
    if (!j.is_object()) return Internal("index build: corrupt instance record " + Str(k));
    const SnapshotRecord r = SnapshotRecord::FromJson(j);
    SAGAD_RETURN_IF_ERROR(PutIndexes(txn, Str(k), &r));
    ++n;
  }
  if (rc != MDB_NOTFOUND) return LmdbError("mdb_cursor_get", rc);
  EngineLog({{"msg", "store indexes built"}, {"instances", n}});
  return Status::Ok();
}

StatusOr<std::unique_ptr<LmdbStore>> LmdbStore::OpenReadOnly(const std::string& dir) {
  std::unique_ptr<LmdbStore> s(new LmdbStore());
  int rc = mdb_env_create(&s->env_);
  if (rc != 0) return LmdbError("mdb_env_create", rc);
  mdb_env_set_maxdbs(s->env_, 16);
  mdb_env_set_maxreaders(s->env_, 1024);
  rc = mdb_env_open(s->env_, dir.c_str(), MDB_NOTLS | MDB_RDONLY, 0644);
  if (rc == EACCES || rc == EROFS) {
    // The lock file cannot be written (a read-only copy, another user's dir).
    mdb_env_close(s->env_);
    s->env_ = nullptr;
    rc = mdb_env_create(&s->env_);
    if (rc != 0) return LmdbError("mdb_env_create", rc);
    mdb_env_set_maxdbs(s->env_, 16);
    rc = mdb_env_open(s->env_, dir.c_str(), MDB_NOTLS | MDB_RDONLY | MDB_NOLOCK, 0644);
  }
  if (rc != 0) return Internal("cannot open LMDB data dir " + dir + ": " + mdb_strerror(rc));
  SAGAD_RETURN_IF_ERROR(s->CheckSize(dir));
  Txn txn(s->env_, false);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  for (auto [name, dbi] : s->Databases()) {
    rc = mdb_dbi_open(txn.get(), name, 0, dbi);
    if (rc != 0) return LmdbError("mdb_dbi_open", rc);
  }
  auto meta = GetJson(txn.get(), s->meta_, "schema_version");
  int v = meta.ok() && meta->is_number_integer() ? meta->get<int>() : -1;
  if (v != kStoreSchemaVersion)
    return FailedPrecondition("data dir " + dir + " has schema_version " + std::to_string(v) +
                              "; this reader knows " + std::to_string(kStoreSchemaVersion) +
                              " (start this version of sagad on it once to migrate it)");
  rc = txn.Commit();  // keeps the handles
  if (rc != 0) return LmdbError("mdb_txn_commit", rc);
  return s;
}

LmdbStore::~LmdbStore() {
  group_.Stop();  // every queued write done first
  if (env_) mdb_env_close(env_);
}

}  // namespace sagad
