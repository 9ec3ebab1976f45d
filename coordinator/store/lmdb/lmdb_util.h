// Small RAII helpers over the LMDB C API, shared by the LMDB store's files
// (private to them): transactions that abort unless committed, cursors,
// JSON values, and errors as Status (a full map or disk is Unavailable).
#pragma once

#include <lmdb.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "coordinator/store/store_fault.h"
#include "util/json_limits.h"
#include "util/status.h"

namespace sagad {
namespace lmdb_util {

// A full map or disk is Unavailable (503 + Retry-After at the API, retried by
// the drivers), with what to do about it; so is an I/O error of the disk (a
// StoreFault: the system's words go to the log); anything else (a record
// LMDB refuses, a corrupt page) is Internal.
inline bool IsFullRc(int rc) { return rc == MDB_MAP_FULL || rc == ENOSPC || rc == EDQUOT; }

inline Status LmdbError(const char* what, int rc) {
  // Said in the operator's terms: no library text reaches a client.
  if (rc == MDB_MAP_FULL)
    return Unavailable(
        "the store is full (its map, lmdb_map_size_mb, is used up): raise lmdb_map_size_mb or "
        "let retention delete finished instances, then writes resume");
  if (IsFullRc(rc))
    return Unavailable(
        "the store is full (the disk or the quota has no space left): free disk space, then "
        "writes resume");
  if (rc == EIO || rc == EROFS || rc == ENOMEM || rc == EAGAIN || rc == MDB_READERS_FULL)
    return StoreFault("LMDB", std::string(what) + ": " + mdb_strerror(rc));
  return Internal(std::string(what) + ": " + mdb_strerror(rc));
}

inline MDB_val Val(const std::string& s) { return MDB_val{s.size(), const_cast<char*>(s.data())}; }

inline std::string Str(const MDB_val& v) {
  return std::string(static_cast<const char*>(v.mv_data), v.mv_size);
}

inline std::string EventKey(const std::string& id, int64_t seq) {
  std::string k = id;
  k.push_back('\0');
  for (int i = 7; i >= 0; --i) k.push_back(static_cast<char>((uint64_t(seq) >> (i * 8)) & 0xff));
  return k;
}

// A transaction that aborts unless committed. `synced` (write transactions)
// counts the ones committed: each is made durable by LMDB with an fdatasync
// of the data file and a synchronous write of the meta page.
class Txn {
 public:
  Txn(MDB_env* env, bool write, std::atomic<uint64_t>* synced = nullptr) : synced_(synced) {
    rc_ = mdb_txn_begin(env, nullptr, write ? 0 : MDB_RDONLY, &txn_);
  }
  ~Txn() {
    if (txn_) mdb_txn_abort(txn_);
  }
  int rc() const { return rc_; }
  MDB_txn* get() { return txn_; }
  int Commit() {
    int rc = mdb_txn_commit(txn_);
    txn_ = nullptr;
    if (rc == 0 && synced_) ++*synced_;
    return rc;
  }

 private:
  MDB_txn* txn_ = nullptr;
  int rc_ = 0;
  std::atomic<uint64_t>* synced_;
};

// A cursor closed on every path out of its scope.
class Cursor {
 public:
  Cursor(MDB_txn* txn, MDB_dbi dbi) { rc_ = mdb_cursor_open(txn, dbi, &cur_); }
  ~Cursor() {
    if (rc_ == 0) mdb_cursor_close(cur_);
  }
  int rc() const { return rc_; }
  int Get(MDB_val* k, MDB_val* v, MDB_cursor_op op) { return mdb_cursor_get(cur_, k, v, op); }

 private:
  MDB_cursor* cur_ = nullptr;
  int rc_ = 0;
};

inline StatusOr<std::string> ReadString(MDB_txn* txn, MDB_dbi dbi, const std::string& key) {
  MDB_val k = Val(key), v;
  int rc = mdb_get(txn, dbi, &k, &v);
  if (rc == MDB_NOTFOUND) return NotFound("not found: " + key);
  if (rc != 0) return LmdbError("mdb_get", rc);
  return Str(v);
}

inline StatusOr<nlohmann::json> GetJson(MDB_txn* txn, MDB_dbi dbi, const std::string& key) {
  MDB_val k = Val(key), v;
  int rc = mdb_get(txn, dbi, &k, &v);
  if (rc == MDB_NOTFOUND) return NotFound("not found: " + key);
  if (rc != 0) return LmdbError("mdb_get", rc);
  nlohmann::json j = nlohmann::json::parse(Str(v), nullptr, false);
  if (j.is_discarded()) return Internal("corrupt record under key " + key);
  return j;
}

// Puts a record already serialised (DumpJson).
inline Status PutText(MDB_txn* txn, MDB_dbi dbi, const std::string& key, const std::string& data,
                      unsigned flags = 0) {
  MDB_val k = Val(key), v = Val(data);
  int rc = mdb_put(txn, dbi, &k, &v, flags);
  if (rc == MDB_KEYEXIST) return AlreadyExists("key exists: " + key);
  if (rc != 0) return LmdbError("mdb_put", rc);
  return Status::Ok();
}

inline Status PutJson(MDB_txn* txn, MDB_dbi dbi, const std::string& key, const nlohmann::json& j,
                      unsigned flags = 0) {
  return PutText(txn, dbi, key, DumpJson(j), flags);
}

// The longest index entry written (LMDB keys are at most 511 bytes); a
// value whose entry would be longer is not indexed.
constexpr size_t kMaxIndexKey = 500;

// The start of the listing's index entries of one value (by_field): the
// index's code, the value, NUL; each entry is this and an instance id.
inline std::string IndexPrefix(char code, const std::string& value) {
  std::string k(1, code);
  k += value;
  k.push_back('\0');
  return k;
}

inline bool IsTerminalName(const std::string& s) { return s == "COMPLETED" || s == "COMPENSATED"; }

}  // namespace lmdb_util
}  // namespace sagad
