#include "coordinator/lmdb_store.h"

#include <gtest/gtest.h>
#include <lmdb.h>

#include <atomic>
#include <thread>

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
  nlohmann::json Snap(const std::string& id, uint64_t version, const std::string& status = "RUNNING") {
    return {{"id", id}, {"version", version}, {"status", status}, {"saga", "s"}};
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

TEST_F(LmdbStoreTest, CommitIsACompareAndSwapOnTheVersion) {
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "instance_created")}, nullptr, {}, nullptr).ok());
  EXPECT_TRUE(store_->Commit("a", 1, Snap("a", 2), {Ev(2, "x")}, {}, {}, nullptr).ok());
  Status stale = store_->Commit("a", 1, Snap("a", 2), {Ev(3, "y")}, {}, {}, nullptr);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  auto events = store_->GetEvents("a");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);  // the losing commit wrote nothing
  EXPECT_EQ((*events)[1].type, "x");
}

// Group commit: many writers at once share transactions, yet each gets its
// own answer: a refused compare-and-swap or a duplicate id fails only
// itself, and everything acknowledged is there after a reopen.
TEST_F(LmdbStoreTest, ConcurrentWritersEachGetTheirOwnAnswer) {
  constexpr int kThreads = 8, kRounds = 50;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::string id = "i" + std::to_string(t);
      if (!store_->CreateInstance(Snap(id, 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok()) ++wrong;
      if (store_->CreateInstance(Snap(id, 1), {Ev(1, "c")}, nullptr, {}, nullptr).code() !=
          StatusCode::kAlreadyExists)
        ++wrong;
      for (uint64_t v = 1; v <= kRounds; ++v) {
        // A stale writer (expects an old version) is refused...
        if (v > 1 && store_->Commit(id, v - 1, Snap(id, v), {Ev(int64_t(v) + 1, "stale")}, {}, {},
                                    nullptr).code() != StatusCode::kFailedPrecondition)
          ++wrong;
        // ...and the right one, in the same or the next batch, is not.
        if (!store_->Commit(id, v, Snap(id, v + 1), {Ev(int64_t(v) + 1, "x")}, {}, {}, nullptr).ok())
          ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, 0);
  store_.reset();
  auto again = LmdbStore::Open(dir_.path());
  ASSERT_TRUE(again.ok());
  for (int t = 0; t < kThreads; ++t) {
    std::string id = "i" + std::to_string(t);
    EXPECT_EQ((*again)->GetInstance(id)->value("version", 0), kRounds + 1);
    EXPECT_EQ((*again)->GetEvents(id)->size(), size_t(kRounds + 1));
  }
}

TEST_F(LmdbStoreTest, EventsComeBackInOrderPerInstance) {
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  ASSERT_TRUE(store_->CreateInstance(Snap("ab", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  std::vector<Event> batch;
  for (int i = 2; i <= 300; ++i) batch.push_back(Ev(i, "e" + std::to_string(i)));
  ASSERT_TRUE(store_->Commit("a", 1, Snap("a", 2), batch, {}, {}, nullptr).ok());
  auto events = store_->GetEvents("a");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 300u);
  for (size_t i = 0; i < events->size(); ++i) EXPECT_EQ((*events)[i].seq, int64_t(i + 1));
  EXPECT_EQ(store_->GetEvents("ab")->size(), 1u);
}

TEST_F(LmdbStoreTest, SubmissionKeysAreUniqueAndKeepTheFirstResponse) {
  Submission s;
  s.key = "k";
  s.request_hash = "h";
  s.instance_id = "a";
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, &s, {}, nullptr).ok());
  s.instance_id = "b";
  EXPECT_EQ(store_->CreateInstance(Snap("b", 1), {Ev(1, "c")}, &s, {}, nullptr).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->GetInstance("b").status().code(), StatusCode::kNotFound);  // nothing half-written
  ASSERT_TRUE(store_->SetSubmissionResponse("k", 201, {{"id", "a"}}).ok());
  ASSERT_TRUE(store_->SetSubmissionResponse("k", 200, {{"id", "zzz"}}).ok());
  auto got = store_->GetSubmission("k");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->instance_id, "a");
  EXPECT_EQ(got->response_status, 201);
}

TEST_F(LmdbStoreTest, ListsNewestFirstWithFiltersAndCursor) {
  for (int i = 0; i < 5; ++i) {
    std::string id = "id" + std::to_string(i);
    ASSERT_TRUE(store_->CreateInstance(Snap(id, 1, i % 2 ? "COMPLETED" : "RUNNING"), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  }
  auto p1 = store_->ListInstances({}, 2, "");
  ASSERT_TRUE(p1.ok());
  ASSERT_EQ(p1->instances.size(), 2u);
  EXPECT_EQ(p1->instances[0]["id"], "id4");
  EXPECT_EQ(p1->instances[1]["id"], "id3");
  auto p2 = store_->ListInstances({}, 10, p1->next_cursor);
  ASSERT_EQ(p2->instances.size(), 3u);
  EXPECT_EQ(p2->instances[0]["id"], "id2");
  EXPECT_TRUE(p2->next_cursor.empty());
  auto running = store_->ListInstances({"RUNNING", "", ""}, 10, "");
  EXPECT_EQ(running->instances.size(), 3u);
  auto active = store_->ListActive();
  ASSERT_EQ(active->size(), 3u);
  EXPECT_EQ((*active)[0].status, "RUNNING");
}

TEST_F(LmdbStoreTest, TheIndexOfUnfinishedInstancesCarriesVersionSagaAndStatus) {
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  ASSERT_TRUE(store_->Commit("a", 1, Snap("a", 2, "AWAITING_APPROVAL"), {Ev(2, "x")}, {}, {}, nullptr).ok());
  auto active = store_->ListActive();
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].id, "a");
  EXPECT_EQ((*active)[0].version, 2u);
  EXPECT_EQ((*active)[0].status, "AWAITING_APPROVAL");
  EXPECT_EQ((*active)[0].saga, Snap("a", 1).value("saga", ""));
  // The compare-and-swap reads the version from the index.
  EXPECT_EQ(store_->Commit("a", 1, Snap("a", 2), {Ev(3, "y")}, {}, {}, nullptr).code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store_->Commit("a", 2, Snap("a", 3, "COMPLETED"), {Ev(3, "y")}, {}, {}, nullptr).ok());
  EXPECT_TRUE(store_->ListActive()->empty());
}

TEST_F(LmdbStoreTest, OutboxRecordsCommitWithTheTransitionAndComeOutInOrder) {
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {{{"n", 1}}}, nullptr).ok());
  ASSERT_TRUE(store_->Commit("a", 1, Snap("a", 2), {Ev(2, "x")}, {}, {{{"n", 2}}, {{"n", 3}}}, nullptr).ok());
  // A losing compare-and-swap writes no outbox record either.
  EXPECT_FALSE(store_->Commit("a", 1, Snap("a", 2), {Ev(3, "y")}, {}, {{{"n", 99}}}, nullptr).ok());
  auto recs = store_->PeekOutbox(10);
  ASSERT_TRUE(recs.ok());
  ASSERT_EQ(recs->size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*recs)[i].message["n"], i + 1);
  ASSERT_TRUE(store_->AckOutbox((*recs)[0].seq).ok());
  EXPECT_EQ(*store_->OutboxSize(), 2u);
  EXPECT_EQ((*store_->PeekOutbox(1))[0].message["n"], 2);
}

TEST_F(LmdbStoreTest, LeasesFenceCommitsAndChangeHandsOnlyWhenExpired) {
  Lease mine{"A", 0, 1};
  mine.expires_at = 1000;
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {}, &mine).ok());
  EXPECT_EQ(store_->AcquireLease("a", "B", 500, 1000, "").status().code(), StatusCode::kFailedPrecondition);
  auto renewed = store_->AcquireLease("a", "A", 500, 1000, "");
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(renewed->generation, 1u);  // same owner, same generation
  auto taken = store_->AcquireLease("a", "B", 1600, 1000, "");  // expired at 1500
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(taken->generation, 2u);
  // The old owner can no longer commit; the new one can.
  Status stale = store_->Commit("a", 1, Snap("a", 2), {Ev(2, "x")}, {}, {}, &mine);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.message().find("lease lost"), std::string::npos);
  EXPECT_TRUE(store_->Commit("a", 1, Snap("a", 2), {Ev(2, "x")}, {}, {}, &*taken).ok());
  auto lost = store_->RenewLeases("A", {"a"}, 1700, 1000);
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(*lost, std::vector<std::string>{"a"});
  // Finishing releases the lease.
  EXPECT_TRUE(store_->Commit("a", 2, Snap("a", 3, "COMPLETED"), {Ev(3, "y")}, {}, {}, &*taken).ok());
  EXPECT_EQ(store_->GetLease("a").status().code(), StatusCode::kNotFound);
}

TEST_F(LmdbStoreTest, RecoveryTakesManyLeasesInOneGoButNotALiveOwnersOnes) {
  Lease live{"other/2", 5000, 3}, dead{"sagad/1", 5000, 4};
  ASSERT_TRUE(store_->CreateInstance(Snap("live", 1), {Ev(1, "c")}, nullptr, {}, &live).ok());
  ASSERT_TRUE(store_->CreateInstance(Snap("dead", 1), {Ev(1, "c")}, nullptr, {}, &dead).ok());
  ASSERT_TRUE(store_->CreateInstance(Snap("free", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  auto taken = store_->AcquireLeases({"live", "dead", "free"}, "sagad/2", 1000, 1000, "sagad/");
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->count("live"), 0u);        // another live process holds it
  EXPECT_EQ(taken->at("dead").generation, 5u);  // the predecessor's: taken at once
  EXPECT_EQ(taken->at("free").generation, 1u);
  EXPECT_EQ(store_->GetLease("live")->owner, "other/2");
  EXPECT_EQ(store_->GetLease("dead")->owner, "sagad/2");
}

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
