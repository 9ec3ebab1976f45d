// LmdbStore: the index of declared search attributes (Store::
// DeclareSearchAttributesAsync). Entries live in by_field beside the
// listing's other indexes: 'a' (an input field) or 'm' (a run's metadata
// field), the field, NUL, the value's search text, NUL, the id. The fields
// declared for a saga are a meta record ("search_attributes" NUL saga: a
// JSON array), read inside each transaction that writes or reads entries,
// so that a list uses the index only once the transaction that declared
// it (and wrote the entries of every stored instance) is committed.
#include <algorithm>
#include <set>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "coordinator/store/lmdb/lmdb_util.h"
#include "sagas/search_attributes.h"
#include "util/log.h"

namespace sagad {

using namespace lmdb_util;

namespace {

std::string DeclaredKey(const std::string& saga) {
  std::string k = "search_attributes";
  k.push_back('\0');
  return k + saga;
}

// code + field + NUL + value + NUL: the entries of one value, newest id last.
std::string AttributePrefix(bool metadata, const std::string& field, const std::string& value) {
  return IndexPrefix(metadata ? 'm' : 'a', field) + value + '\0';
}

// An id is 29 bytes.
constexpr size_t kMaxAttributePrefix = kMaxIndexKey - 29;

}  // namespace

StatusOr<std::vector<std::string>> LmdbStore::DeclaredAttributes(MDB_txn* txn,
                                                                 const std::string& saga) {
  auto j = GetJson(txn, meta_, DeclaredKey(saga));
  if (j.status().code() == StatusCode::kNotFound) return std::vector<std::string>{};
  if (!j.ok()) return j.status();
  std::vector<std::string> out;
  if (j->is_array())
    for (const auto& f : *j)
      if (f.is_string()) out.push_back(f.get<std::string>());
  return out;
}

std::vector<std::string> LmdbStore::AttributeKeys(const std::string& id,
                                                  const nlohmann::json& snapshot,
                                                  const std::vector<std::string>& fields) {
  std::vector<std::string> out;
  for (const std::string& name : fields) {
    std::string field;
    const bool metadata = SplitSearchAttribute(name, &field);
    auto root = snapshot.find(metadata ? "metadata" : "input");
    if (root == snapshot.end() || !root->is_object()) continue;
    auto v = root->find(field);
    std::string text;
    if (v == root->end() || !SearchText(*v, &text) || text.find('\0') != std::string::npos)
      continue;
    std::string k = AttributePrefix(metadata, field, text);
    if (k.size() <= kMaxAttributePrefix) out.push_back(k + id);
  }
  return out;
}

Status LmdbStore::PutAttributeKeys(MDB_txn* txn, const std::string& id,
                                   const nlohmann::json& snapshot, bool put) {
  auto fields = DeclaredAttributes(txn, snapshot.value("saga", ""));
  if (!fields.ok()) return fields.status();
  for (const std::string& k : AttributeKeys(id, snapshot, *fields)) {
    if (put) {
      SAGAD_RETURN_IF_ERROR(PutText(txn, by_field_, k, ""));
      continue;
    }
    MDB_val key = Val(k);
    int rc = mdb_del(txn, by_field_, &key, nullptr);
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbError("mdb_del", rc);
  }
  return Status::Ok();
}

Status LmdbStore::Declare(MDB_txn* txn, const std::string& saga,
                          const std::vector<std::string>& fields) {
  auto held = DeclaredAttributes(txn, saga);
  if (!held.ok()) return held.status();
  std::set<std::string> all(held->begin(), held->end());
  std::vector<std::string> missing;
  for (const std::string& f : fields)
    if (all.insert(f).second) missing.push_back(f);
  if (missing.empty()) return Status::Ok();
  // The saga's instances, from the saga index: their entries for the
  // fields declared now.
  Cursor cur(txn, by_field_);
  if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
  const std::string prefix = IndexPrefix('g', saga);
  std::vector<std::string> ids;
  MDB_val k = Val(prefix), v;
  int rc = cur.Get(&k, &v, MDB_SET_RANGE);
  for (; rc == 0; rc = cur.Get(&k, &v, MDB_NEXT)) {
    std::string key = Str(k);
    if (key.compare(0, prefix.size(), prefix) != 0) break;
    ids.push_back(key.substr(prefix.size()));
  }
  if (rc != 0 && rc != MDB_NOTFOUND) return LmdbError("mdb_cursor_get", rc);
  for (const std::string& id : ids) {
    auto text = ReadString(txn, instances_, id);
    if (!text.ok()) continue;  // an index entry without its instance
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_object()) continue;
    for (const std::string& key : AttributeKeys(id, j, missing))
      SAGAD_RETURN_IF_ERROR(PutText(txn, by_field_, key, ""));
  }
  SAGAD_RETURN_IF_ERROR(PutJson(txn, meta_, DeclaredKey(saga),
                                nlohmann::json(std::vector<std::string>(all.begin(), all.end()))));
  EngineLog({{"msg", "search attributes indexed"},
             {"saga", saga},
             {"fields", missing},
             {"instances", ids.size()}});
  return Status::Ok();
}

void LmdbStore::DeclareSearchAttributesAsync(const std::string& saga,
                                             const std::vector<std::string>& fields,
                                             std::function<void(Status)> done) {
  QueueOther(
      nullptr, [this, saga, fields](MDB_txn* txn) { return Declare(txn, saga, fields); },
      std::move(done));
}

StatusOr<std::string> LmdbStore::AttributeIndexOf(MDB_txn* txn, const InstanceFilter& f) {
  if (f.input_field.empty() || f.input_value.find('\0') != std::string::npos) return std::string();
  const std::string prefix = AttributePrefix(f.in_metadata, f.input_field, f.input_value);
  if (prefix.size() > kMaxAttributePrefix) return std::string();  // such values are not indexed
  const std::string name = (f.in_metadata ? kMetadataAttributePrefix : "") + f.input_field;
  // Every saga whose instances may match must have declared the field.
  std::vector<std::string> sagas;
  if (!f.saga.empty()) {
    sagas.push_back(f.saga);
  } else {  // the sagas that have instances: one step per saga in the saga index
    Cursor cur(txn, by_field_);
    if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
    std::string at = "g";
    MDB_val k = Val(at), v;
    int rc;
    while ((rc = cur.Get(&k, &v, MDB_SET_RANGE)) == 0) {
      std::string key = Str(k);
      const size_t nul = key.find('\0');
      if (key[0] != 'g' || nul == std::string::npos) break;
      sagas.push_back(key.substr(1, nul - 1));
      at = key.substr(0, nul) + '\x01';  // past every entry of this saga
      k = Val(at);
    }
    if (rc != 0 && rc != MDB_NOTFOUND) return LmdbError("mdb_cursor_get", rc);
  }
  for (const std::string& saga : sagas) {
    auto declared = DeclaredAttributes(txn, saga);
    if (!declared.ok()) return declared.status();
    if (std::find(declared->begin(), declared->end(), name) == declared->end())
      return std::string();
  }
  return prefix;
}

Status LmdbStore::VerifyIndexes(std::vector<std::string>* problems) {
  Txn txn(env_, false);
  if (txn.rc() != 0) return LmdbError("mdb_txn_begin", txn.rc());
  // Every entry each stored instance should have.
  std::set<std::string> expected;
  {
    Cursor cur(txn.get(), instances_);
    if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
    MDB_val k, v;
    int rc;
    for (rc = cur.Get(&k, &v, MDB_FIRST); rc == 0; rc = cur.Get(&k, &v, MDB_NEXT)) {
      const std::string id = Str(k);
      auto j = nlohmann::json::parse(Str(v), nullptr, false);
      if (!j.is_object()) {
        problems->push_back(id + ": the snapshot is not JSON");
        continue;
      }
      auto fields = DeclaredAttributes(txn.get(), j.value("saga", ""));
      if (!fields.ok()) return fields.status();
      std::vector<std::string> keys = IndexKeys(id, SnapshotRecord::FromJson(j));
      for (auto& a : AttributeKeys(id, j, *fields)) keys.push_back(std::move(a));
      for (auto& key : keys) {
        if (!ReadString(txn.get(), by_field_, key).ok())
          problems->push_back(id + ": index entry missing: " + key.substr(0, key.find('\0')));
        expected.insert(std::move(key));
      }
    }
    if (rc != MDB_NOTFOUND) return LmdbError("mdb_cursor_get", rc);
  }
  // And no entry beside them.
  Cursor cur(txn.get(), by_field_);
  if (cur.rc() != 0) return LmdbError("mdb_cursor_open", cur.rc());
  MDB_val k, v;
  int rc;
  for (rc = cur.Get(&k, &v, MDB_FIRST); rc == 0; rc = cur.Get(&k, &v, MDB_NEXT)) {
    const std::string key = Str(k);
    if (!expected.count(key))
      problems->push_back(key.substr(key.rfind('\0') + 1) +
                          ": stray index entry: " + key.substr(0, key.find('\0')));
  }
  if (rc != MDB_NOTFOUND) return LmdbError("mdb_cursor_get", rc);
  return Status::Ok();
}

}  // namespace sagad
