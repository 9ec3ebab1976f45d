// LmdbStore: which downstream services an operator paused (one record in
// the meta database, a sorted JSON array of names).
#include <algorithm>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "coordinator/store/lmdb/lmdb_util.h"

namespace sagad {

using namespace lmdb_util;

namespace {
const char kPausedKey[] = "paused_services";
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

Status LmdbStore::SetServicePaused(const std::string& service, bool paused) {
  Txn txn(env_, true, &synced_commits_);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  auto j = GetJson(txn.get(), meta_, kPausedKey);
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
  SAGAD_RETURN_IF_ERROR(PutJson(txn.get(), meta_, kPausedKey, names));
  int rc = txn.Commit();
  return rc == 0 ? Status::Ok() : LmdbError("mdb_txn_commit", rc);
}

}  // namespace sagad
