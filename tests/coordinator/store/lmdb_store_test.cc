// What only the LMDB store has: its schema stamp in the meta database, and
// how a full map shows in CheckWritable.
// Everything else a Store promises: store_conformance_test.cc.
#include "coordinator/store/lmdb/lmdb_store.h"

#include <gtest/gtest.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>

#include "coordinator/store/lmdb/lmdb_util.h"
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

TEST_F(LmdbStoreTest, APauseSurvivesARestartAndIsReadReadOnly) {
  ASSERT_TRUE(store_->SetServicePaused("payments", true, {{"by", "ann"}}).ok());
  store_.reset();
  auto again = LmdbStore::Open(dir_.path());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*(*again)->PausedServices(), std::vector<std::string>{"payments"});
  again->reset();
  auto ro = LmdbStore::OpenReadOnly(dir_.path());
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  EXPECT_EQ(*(*ro)->PausedServices(), std::vector<std::string>{"payments"});
  EXPECT_EQ((*(*ro)->PauseNotes())["payments"]["by"], "ann");
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

// Many instances, created in a few group commits; instance i is the i-th
// oldest (ids as NewInstanceId makes them: time first).
void CreateMany(Store& store, int n, const std::function<nlohmann::json(int)>& snap) {
  std::mutex mu;
  std::condition_variable cv;
  int done = 0, failed = 0;
  for (int i = 0; i < n; ++i) {
    auto w = std::make_shared<CreationWrite>();
    w->snapshot = snap(i);
    store.CreateInstanceAsync(w, [&](Status s) {
      std::lock_guard<std::mutex> l(mu);
      ++done;
      failed += !s.ok();
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> l(mu);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(60), [&] { return done == n; }));
  ASSERT_EQ(failed, 0);
}

std::string IdOf(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%012x-%016x", i + 1, i + 1);
  return buf;
}

// Regression: a filtered list read every snapshot of the history; now an
// indexed condition (status, saga, waiting, owner) reads only the instances
// that have its value, and any list reads at most kMaxExaminedPerList
// snapshots per request (a page that stops there carries its cursor).
TEST_F(LmdbStoreTest, IndexedFiltersReadOnlyTheirCandidatesAndAnyListIsBounded) {
  const int n = static_cast<int>(kMaxExaminedPerList) + 500;
  CreateMany(*store_, n, [](int i) {
    const bool review = i < 3;  // the three oldest
    nlohmann::json j = {{"id", IdOf(i)},
                        {"version", 1},
                        {"status", review ? "NEEDS_REVIEW" : "COMPLETED"},
                        {"saga", "s"},
                        {"owner", i % 2 ? "agent-a" : "agent-b"},
                        {"input", {{"customer", i == 1 ? "rare" : "common"}}}};
    if (review) j["waiting_for"] = "review";
    return j;
  });
  // Indexed: the three, in one page, no cursor, newest first.
  InstanceFilter review;
  review.status = "NEEDS_REVIEW";
  auto page = store_->ListInstances(review, 10, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->instances.size(), 3u);
  EXPECT_EQ(page->instances[0]["id"], IdOf(2));
  EXPECT_EQ(page->next_cursor, "");
  EXPECT_TRUE(page->indexed);
  EXPECT_EQ(store_->ListInstances({"", "", "review"}, 10, "")->instances.size(), 3u);
  InstanceFilter both = review;
  both.owner = "agent-a";
  EXPECT_EQ(store_->ListInstances(both, 10, "")->instances.size(), 1u);
  // Paging an indexed value: every instance once, in order.
  InstanceFilter mine;
  mine.owner = "agent-b";
  std::string cursor;
  int seen = 0;
  std::string previous = "~";
  do {
    auto p = store_->ListInstances(mine, 1000, cursor);
    ASSERT_TRUE(p.ok());
    for (const auto& i : p->instances) {
      EXPECT_LT(i["id"].get<std::string>(), previous);
      previous = i["id"];
      ++seen;
    }
    cursor = p->next_cursor;
  } while (!cursor.empty());
  EXPECT_EQ(seen, (n + 1) / 2);
  // Not indexed: the first request stops at the bound with a cursor; the
  // one match is found by following it.
  InstanceFilter rare;
  rare.input_field = "customer";
  rare.input_value = "rare";
  auto first = store_->ListInstances(rare, 10, "");
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->instances.empty());
  EXPECT_FALSE(first->indexed);
  ASSERT_FALSE(first->next_cursor.empty());
  auto second = store_->ListInstances(rare, 10, first->next_cursor);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->instances.size(), 1u);
  EXPECT_EQ(second->instances[0]["id"], IdOf(1));
  // A status change moves an instance between the status's entries.
  auto moved = Snap(IdOf(0), 2);
  moved["status"] = "COMPLETED";
  ASSERT_TRUE(store_->Commit(IdOf(0), 1, moved, {}, {}, {}, nullptr).ok());
  EXPECT_EQ(store_->ListInstances(review, 10, "")->instances.size(), 2u);
}

// A data dir of schema 1 (before the indexes) gets them when it is opened.
TEST_F(LmdbStoreTest, ADataDirWithoutIndexesGetsThemWhenOpened) {
  CreateMany(*store_, 5, [](int i) {
    return nlohmann::json{{"id", IdOf(i)},
                          {"version", 1},
                          {"status", i < 2 ? "NEEDS_REVIEW" : "RUNNING"},
                          {"saga", "s"}};
  });
  store_.reset();
  // As schema 1 left it: no index entries, stamped 1.
  MDB_env* env;
  ASSERT_EQ(mdb_env_create(&env), 0);
  mdb_env_set_maxdbs(env, 16);
  ASSERT_EQ(mdb_env_open(env, dir_.path().c_str(), 0, 0644), 0);
  MDB_txn* txn;
  MDB_dbi meta, by_field, indexed;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "meta", 0, &meta), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "by_field", 0, &by_field), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "indexed", 0, &indexed), 0);
  ASSERT_EQ(mdb_drop(txn, by_field, 0), 0);
  ASSERT_EQ(mdb_drop(txn, indexed, 0), 0);
  std::string k = "schema_version", v = "1";
  MDB_val key{k.size(), k.data()}, val{v.size(), v.data()};
  ASSERT_EQ(mdb_put(txn, meta, &key, &val, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
  auto again = LmdbStore::Open(dir_.path());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->ListInstances({"NEEDS_REVIEW", "", ""}, 10, "")->instances.size(), 2u);
  EXPECT_EQ((*again)->ListInstances({"", "s", ""}, 10, "")->instances.size(), 5u);
  std::vector<std::string> problems;
  ASSERT_TRUE((*again)->VerifyIndexes(&problems).ok());
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
  // sagactl verify's check: an entry lost and an entry left behind are
  // both reported.
  again->reset();
  ASSERT_EQ(mdb_env_create(&env), 0);
  mdb_env_set_maxdbs(env, 16);
  ASSERT_EQ(mdb_env_open(env, dir_.path().c_str(), 0, 0644), 0);
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "by_field", 0, &by_field), 0);
  std::string lost = std::string("sNEEDS_REVIEW") + '\0' + IdOf(0);
  std::string stray = std::string("sRUNNING") + '\0' + IdOf(0);
  MDB_val lk{lost.size(), lost.data()}, sk{stray.size(), stray.data()}, empty{0, nullptr};
  ASSERT_EQ(mdb_del(txn, by_field, &lk, nullptr), 0);
  ASSERT_EQ(mdb_put(txn, by_field, &sk, &empty, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
  auto tampered = LmdbStore::OpenReadOnly(dir_.path());
  ASSERT_TRUE(tampered.ok());
  problems.clear();
  ASSERT_TRUE((*tampered)->VerifyIndexes(&problems).ok());
  EXPECT_EQ(problems.size(), 2u) << ::testing::PrintToString(problems);
}

// A creation refused for lack of space makes the store unready; a small
// transition that still fits afterwards must not make it ready again (a
// submission would still be refused: /readyz would lie). Room made by
// retention is found by the probe, within a second or so.
TEST(LmdbFullStoreTest, StaysUnwritableUntilThereIsRoomForNewWork) {
  testing::TempDir dir;
  auto opened = LmdbStore::Open(dir.path(), size_t(1) << 20);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  LmdbStore& store = **opened;
  nlohmann::json small = {{"id", "a"}, {"version", 1}, {"status", "RUNNING"}, {"saga", "s"}};
  ASSERT_TRUE(store.CreateInstance(small, {}, nullptr, {}, nullptr).ok());
  Status refused;
  int created = 0;
  for (int i = 0; i < 5000 && refused.ok(); ++i) {
    nlohmann::json big = {{"id", "f" + std::to_string(i)},
                          {"version", 1},
                          {"status", "COMPLETED"},
                          {"saga", "s"},
                          {"updated_at", 0},
                          {"pad", std::string(40000, 'x')}};  // 10 pages a creation
    refused = store.CreateInstance(big, {}, nullptr, {}, nullptr);
    if (refused.ok()) ++created;
  }
  ASSERT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
  ASSERT_GT(created, 5);
  EXPECT_FALSE(store.CheckWritable().ok());
  small["version"] = 2;
  Status fits = store.Commit("a", 1, small, {}, {}, {}, nullptr);
  ASSERT_TRUE(fits.ok()) << "the test needs a transition that still fits: " << fits.ToString();
  Status writable = store.CheckWritable();
  EXPECT_EQ(writable.code(), StatusCode::kUnavailable);
  EXPECT_NE(writable.message().find("the store is full"), std::string::npos) << writable.ToString();
  // Retention makes room (several short transactions, as the sweeper).
  size_t deleted = 0;
  for (int i = 0; i < 100 && deleted < size_t(created); ++i) {
    auto ids = store.DeleteFinished(1, 8);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    if (ids->empty()) break;
    deleted += ids->size();
  }
  EXPECT_EQ(deleted, size_t(created));
  EXPECT_TRUE(testing::WaitFor([&] { return store.CheckWritable().ok(); }));
  nlohmann::json again = {{"id", "b"},
                          {"version", 1},
                          {"status", "RUNNING"},
                          {"saga", "s"},
                          {"pad", std::string(2000, 'x')}};
  EXPECT_TRUE(store.CreateInstance(again, {}, nullptr, {}, nullptr).ok());
}

// Regression: a data.mdb shorter than its meta page says (3 pages of it)
// used to fault with SIGBUS on the first transaction.
TEST_F(LmdbStoreTest, ATruncatedDataFileIsRefusedByNameBeforeAnyPageIsRead) {
  for (int i = 0; i < 200; ++i)
    ASSERT_TRUE(store_
                    ->CreateInstance(Snap("i" + std::to_string(i), 1),
                                     {Ev(1, std::string(500, 'x'))}, nullptr, {}, nullptr)
                    .ok());
  store_.reset();
  const std::string file = dir_.path() + "/data.mdb";
  ASSERT_EQ(truncate(file.c_str(), 3 * 4096), 0);
  auto s = LmdbStore::Open(dir_.path());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(file + " is truncated"), std::string::npos)
      << s.status().ToString();
  auto r = LmdbStore::OpenReadOnly(dir_.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is truncated"), std::string::npos);
}

// Regression: sagactl inspect could not read a data dir it may not write.
TEST_F(LmdbStoreTest, ADataDirThatCannotBeWrittenCanStillBeRead) {
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  store_.reset();
  ASSERT_EQ(chmod((dir_.path() + "/lock.mdb").c_str(), 0444), 0);
  ASSERT_EQ(chmod((dir_.path() + "/data.mdb").c_str(), 0444), 0);
  ASSERT_EQ(chmod(dir_.path().c_str(), 0555), 0);
  if (geteuid() == 0) {
    // root may write anyway: read it as nobody, through sagactl.
    std::string cmd = "runuser -u nobody -- " SAGACTL_BIN " --json inspect --data-dir " +
                      dir_.path() + " a >/dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  } else {
    auto r = LmdbStore::OpenReadOnly(dir_.path());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE((*r)->GetInstance("a").ok());
  }
  auto r = LmdbStore::OpenReadOnly(dir_.path());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)->GetInstance("a").ok());
  chmod(dir_.path().c_str(), 0755);
}

// Regression: a disk that answers EIO is a store fault: 503 material
// (Unavailable), the system's words kept for the log.
TEST(LmdbErrorTest, AnIoErrorIsUnavailableAndCarriesAReferenceNotTheSystemsWords) {
  Status s = lmdb_util::LmdbError("mdb_txn_commit", EIO);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message().find("Input/output"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ref-"), std::string::npos) << s.message();
  EXPECT_EQ(lmdb_util::LmdbError("mdb_put", MDB_BAD_VALSIZE).code(), StatusCode::kInternal);
}

// Declared search attributes: once the declaration committed,
// a search on the field reads only the instances that have the value, those
// stored before it too; retention deletes their entries; a saga that did
// not declare the field keeps the search a bounded scan (never silently
// incomplete); the declaration survives a restart.
TEST_F(LmdbStoreTest, ADeclaredSearchAttributeIsAnsweredFromItsIndex) {
  const int n = static_cast<int>(kMaxExaminedPerList) + 500;
  auto order = [](int i) {
    return nlohmann::json{{"id", IdOf(i)},
                          {"version", 1},
                          {"status", "COMPLETED"},
                          {"saga", "orders"},
                          {"updated_at", 1},
                          {"input", {{"customer", i == 1 || i == n - 1 ? "rare" : "common"}}}};
  };
  CreateMany(*store_, n - 1, order);  // before the declaration
  InstanceFilter rare;
  rare.input_field = "customer";
  rare.input_value = "rare";
  EXPECT_FALSE(store_->ListInstances(rare, 10, "")->indexed);
  std::promise<Status> declared;
  store_->DeclareSearchAttributesAsync("orders", {"customer", "sku"},
                                       [&](Status s) { declared.set_value(s); });
  ASSERT_TRUE(declared.get_future().get().ok());
  CreateMany(*store_, 1, [&](int) { return order(n - 1); });  // after it
  auto page = store_->ListInstances(rare, 10, "");
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->indexed);
  ASSERT_EQ(page->instances.size(), 2u);  // both, in one page
  EXPECT_EQ(page->instances[0]["id"], IdOf(n - 1));
  EXPECT_EQ(page->instances[1]["id"], IdOf(1));
  EXPECT_EQ(page->next_cursor, "");
  rare.saga = "orders";
  rare.status = "COMPLETED";
  EXPECT_EQ(store_->ListInstances(rare, 10, "")->instances.size(), 2u);
  // Retention deletes an instance with its entries.
  ASSERT_TRUE(store_->DeleteFinished(2, 3).ok());
  page = store_->ListInstances(rare, 10, "");
  ASSERT_EQ(page->instances.size(), 1u);
  EXPECT_EQ(page->instances[0]["id"], IdOf(n - 1));
  // Another saga with instances has not declared it: a search across sagas
  // is a bounded scan again; within the declaring saga still indexed.
  CreateMany(*store_, 1, [&](int) {
    nlohmann::json j = order(n);
    j["saga"] = "returns";
    return j;
  });
  rare.saga = "";
  EXPECT_FALSE(store_->ListInstances(rare, 10, "")->indexed);
  rare.saga = "orders";
  EXPECT_TRUE(store_->ListInstances(rare, 10, "")->indexed);
  store_.reset();
  auto again = LmdbStore::Open(dir_.path());
  ASSERT_TRUE(again.ok());
  page = (*again)->ListInstances(rare, 10, "");
  EXPECT_TRUE(page->indexed);
  EXPECT_EQ(page->instances.size(), 1u);
  std::vector<std::string> problems;
  ASSERT_TRUE((*again)->VerifyIndexes(&problems).ok());
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
}

}  // namespace
}  // namespace sagad
