// What only the LMDB store has: its schema stamp in the meta database.
// Everything else a Store promises: store_conformance_test.cc.
#include "coordinator/lmdb_store.h"

#include <gtest/gtest.h>
#include <lmdb.h>

#include "tests/testing/subprocess.h"

namespace sagad {
namespace {

class LmdbStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = LmdbStore::Open(dir_.path());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  nlohmann::json Snap(const std::string& id, uint64_t version) {
    return {{"id", id}, {"version", version}, {"status", "RUNNING"}, {"saga", "s"}};
  }
  Event Ev(int64_t seq, const std::string& type) {
    Event e;
    e.seq = seq;
    e.type = type;
    return e;
  }

  testing::TempDir dir_;
  std::unique_ptr<LmdbStore> store_;
};

TEST_F(LmdbStoreTest, SurvivesReopenAndRefusesANewerSchema) {
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  store_.reset();
  auto again = LmdbStore::Open(dir_.path());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)->GetInstance("a").ok());
  again->reset();
  // Bump the schema version behind its back.
  MDB_env* env;
  ASSERT_EQ(mdb_env_create(&env), 0);
  mdb_env_set_maxdbs(env, 16);
  ASSERT_EQ(mdb_env_open(env, dir_.path().c_str(), 0, 0644), 0);
  MDB_txn* txn;
  MDB_dbi meta;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "meta", 0, &meta), 0);
  std::string k = "schema_version", v = "99";
  MDB_val key{k.size(), k.data()}, val{v.size(), v.data()};
  ASSERT_EQ(mdb_put(txn, meta, &key, &val, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
  auto refused = LmdbStore::Open(dir_.path());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("newer"), std::string::npos);
}

}  // namespace
}  // namespace sagad
