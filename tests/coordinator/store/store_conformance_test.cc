// One conformance suite for every Store: built three times, against LMDB
// and the simulator's MemoryStore (label unit) and against a real
// PostgreSQL server (label postgres), by SAGAD_STORE_BACKEND_*. Leases are judged by real time here
// (PostgreSQL uses its own clock), so the tests pass the wall clock and wait on conditions.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "tests/coordinator/store/store_test_fixture.h"

namespace sagad {
namespace {

TEST_F(StoreTest, CommitIsACompareAndSwapOnTheVersion) {
  ASSERT_TRUE(
      store_->CreateInstance(Snap("a", 1), {Ev(1, "instance_created")}, nullptr, {}, nullptr).ok());
  EXPECT_TRUE(store_->Commit("a", 1, Snap("a", 2), {Ev(2, "x")}, {}, {}, nullptr).ok());
  Status stale = store_->Commit("a", 1, Snap("a", 2), {Ev(3, "y")}, {}, {}, nullptr);
  EXPECT_EQ(stale.code(), StatusCode::kAborted);
  auto events = store_->GetEvents("a");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);  // the losing commit wrote nothing
  EXPECT_EQ((*events)[1].type, "x");
  EXPECT_EQ(store_->GetInstance("a")->value("version", 0), 2);
}

// Group commit: many writers at once share transactions, yet each gets its
// own answer: a refused compare-and-swap or a duplicate id fails only
// itself, and everything acknowledged is there after a reopen.
TEST_F(StoreTest, ConcurrentWritersEachGetTheirOwnAnswer) {
  constexpr int kThreads = 8, kRounds = 30;
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
        if (v > 1 &&
            store_->Commit(id, v - 1, Snap(id, v), {Ev(int64_t(v) + 1, "stale")}, {}, {}, nullptr)
                    .code() != StatusCode::kAborted)
          ++wrong;
        if (!store_->Commit(id, v, Snap(id, v + 1), {Ev(int64_t(v) + 1, "x")}, {}, {}, nullptr)
                 .ok())
          ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_LT(store_->SyncedCommits(), uint64_t(kThreads * (2 * kRounds + 2)));
  store_.reset();
  store_ = Open();
  for (int t = 0; t < kThreads; ++t) {
    std::string id = "i" + std::to_string(t);
    EXPECT_EQ(store_->GetInstance(id)->value("version", 0), kRounds + 1);
    EXPECT_EQ(store_->GetEvents(id)->size(), size_t(kRounds + 1));
  }
}

// Two handles (two processes, with PostgreSQL) race the same transition:
// exactly one wins each round, the other changes nothing.
TEST_F(StoreTest, TwoWritersRacingTheSameVersionOneWins) {
  ASSERT_TRUE(store_->CreateInstance(Snap("r", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  Store& other = Second();
  constexpr int kRounds = 40;
  std::atomic<int> wins{0}, refused{0}, wrong{0};
  std::atomic<uint64_t> version{1};
  for (int round = 0; round < kRounds; ++round) {
    uint64_t v = version;
    auto race = [&](Store& s, const std::string& who) {
      Status st = s.Commit("r", v, Snap("r", v + 1), {Ev(int64_t(v) + 1, who)}, {}, {}, nullptr);
      if (st.ok())
        ++wins;
      else if (st.code() == StatusCode::kAborted)
        ++refused;
      else
        ++wrong;
    };
    std::thread a([&] { race(*store_, "a"); }), b([&] { race(other, "b"); });
    a.join();
    b.join();
    version = v + 1;
  }
  EXPECT_EQ(wins, kRounds);
  EXPECT_EQ(refused, kRounds);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(store_->GetEvents("r")->size(), size_t(kRounds + 1));
}

TEST_F(StoreTest, EventsComeBackInOrderPerInstance) {
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

TEST_F(StoreTest, OperationRecordsAreKeptByKey) {
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  OperationRecord op;
  op.key = "a:step";
  op.instance_id = "a";
  op.state = "STARTED";
  op.result = {{"x", 1}};
  ASSERT_TRUE(store_->Commit("a", 1, Snap("a", 2), {Ev(2, "x")}, {op}, {}, nullptr).ok());
  op.state = "COMMITTED";
  ASSERT_TRUE(store_->Commit("a", 2, Snap("a", 3), {Ev(3, "y")}, {op}, {}, nullptr).ok());
  auto got = store_->GetOperation("a:step");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, "COMMITTED");
  EXPECT_EQ(got->result["x"], 1);
  EXPECT_EQ(store_->GetOperation("nope").status().code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, SubmissionKeysAreUniqueAndKeepTheFirstResponse) {
  Submission s;
  s.key = "k";
  s.request_hash = "h";
  s.instance_id = "a";
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, &s, {}, nullptr).ok());
  s.instance_id = "b";
  EXPECT_EQ(store_->CreateInstance(Snap("b", 1), {Ev(1, "c")}, &s, {}, nullptr).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->GetInstance("b").status().code(),
            StatusCode::kNotFound);  // nothing half-written
  EXPECT_TRUE(store_->GetEvents("b")->empty());
  ASSERT_TRUE(store_->SetSubmissionResponse("k", 201, {{"id", "a"}}).ok());
  ASSERT_TRUE(store_->SetSubmissionResponse("k", 200, {{"id", "zzz"}}).ok());
  auto got = store_->GetSubmission("k");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->instance_id, "a");
  EXPECT_EQ(got->request_hash, "h");
  EXPECT_EQ(got->response_status, 201);
  EXPECT_EQ(got->response["id"], "a");
  EXPECT_EQ(store_->GetSubmission("other").status().code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, ListsNewestFirstWithFiltersAndCursor) {
  for (int i = 0; i < 5; ++i) {
    std::string id = "id" + std::to_string(i);
    nlohmann::json snap = Snap(id, 1, i % 2 ? "COMPLETED" : "RUNNING");
    if (i == 2) snap["waiting_for"] = "approval";
    if (i == 4) snap["saga"] = "other";
    if (i != 0) snap["owner"] = i % 2 ? "agent-a" : "agent-b";
    ASSERT_TRUE(store_->CreateInstance(snap, {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  }
  // A principal's own instances (the owner a submitter lists by).
  InstanceFilter mine;
  mine.owner = "agent-a";
  auto owned = store_->ListInstances(mine, 10, "");
  ASSERT_TRUE(owned.ok()) << owned.status().ToString();
  ASSERT_EQ(owned->instances.size(), 2u);
  EXPECT_EQ(owned->instances[0]["id"], "id3");
  mine.status = "COMPLETED";
  EXPECT_EQ(store_->ListInstances(mine, 10, "")->instances.size(), 2u);
  mine.owner = "nobody";
  EXPECT_EQ(store_->ListInstances(mine, 10, "")->instances.size(), 0u);
  auto p1 = store_->ListInstances({}, 2, "");
  ASSERT_TRUE(p1.ok());
  ASSERT_EQ(p1->instances.size(), 2u);
  EXPECT_EQ(p1->instances[0]["id"], "id4");
  EXPECT_EQ(p1->instances[1]["id"], "id3");
  auto p2 = store_->ListInstances({}, 10, p1->next_cursor);
  ASSERT_EQ(p2->instances.size(), 3u);
  EXPECT_EQ(p2->instances[0]["id"], "id2");
  EXPECT_TRUE(p2->next_cursor.empty());
  EXPECT_EQ(store_->ListInstances({"RUNNING", "", ""}, 10, "")->instances.size(), 3u);
  EXPECT_EQ(store_->ListInstances({"", "other", ""}, 10, "")->instances.size(), 1u);
  auto waiting = store_->ListInstances({"", "", "approval"}, 10, "");
  ASSERT_EQ(waiting->instances.size(), 1u);
  EXPECT_EQ(waiting->instances[0]["id"], "id2");
  auto active = store_->ListActive();
  ASSERT_EQ(active->size(), 3u);
  EXPECT_EQ((*active)[0].status, "RUNNING");
}

TEST_F(StoreTest, TheIndexOfUnfinishedInstancesCarriesVersionSagaAndStatus) {
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  ASSERT_TRUE(
      store_->Commit("a", 1, Snap("a", 2, "AWAITING_APPROVAL"), {Ev(2, "x")}, {}, {}, nullptr)
          .ok());
  auto active = store_->ListActive();
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].id, "a");
  EXPECT_EQ((*active)[0].version, 2u);
  EXPECT_EQ((*active)[0].status, "AWAITING_APPROVAL");
  EXPECT_EQ((*active)[0].saga, "s");
  EXPECT_EQ(store_->Commit("a", 1, Snap("a", 2), {Ev(3, "y")}, {}, {}, nullptr).code(),
            StatusCode::kAborted);
  ASSERT_TRUE(
      store_->Commit("a", 2, Snap("a", 3, "COMPLETED"), {Ev(3, "y")}, {}, {}, nullptr).ok());
  EXPECT_TRUE(store_->ListActive()->empty());
}

TEST_F(StoreTest, InstancesAreFoundByTheirKeyAndByAnInputField) {
  auto create = [&](const std::string& id, nlohmann::json input, const std::string& key) {
    nlohmann::json snap = Snap(id, 1);
    snap["input"] = std::move(input);
    Submission sub;
    sub.key = key;
    sub.request_hash = "h";
    sub.instance_id = id;
    ASSERT_TRUE(
        store_->CreateInstance(snap, {Ev(1, "c")}, key.empty() ? nullptr : &sub, {}, nullptr).ok());
  };
  create("a", {{"order", "A-1"}, {"amount", 100}, {"vip", true}}, "key-a");
  create("b", {{"order", "B-2"}, {"amount", 250.5}, {"vip", false}}, "");
  create("c", {{"order", "A-1"}, {"amount", "100"}, {"note", nullptr}}, "key-c");
  auto ids = [&](InstanceFilter f) {
    std::vector<std::string> out;
    auto page = store_->ListInstances(f, 10, "");  // kept: the loop walks its instances
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (page.ok())
      for (const auto& j : page->instances) out.push_back(j["id"]);
    return out;
  };
  InstanceFilter by_key;
  by_key.idempotency_key = "key-c";
  EXPECT_EQ(ids(by_key), std::vector<std::string>{"c"});
  by_key.idempotency_key = "no-such-key";
  EXPECT_TRUE(ids(by_key).empty());
  by_key.idempotency_key = "key-a";
  by_key.status = "COMPLETED";  // the rest of the filter still applies
  EXPECT_TRUE(ids(by_key).empty());
  InstanceFilter by_input;
  by_input.input_field = "order";
  by_input.input_value = "A-1";
  EXPECT_EQ(ids(by_input), (std::vector<std::string>{"c", "a"}));  // newest first
  by_input.input_field = "amount";
  by_input.input_value = "100";  // the number 100 and the string "100"
  EXPECT_EQ(ids(by_input), (std::vector<std::string>{"c", "a"}));
  by_input.input_value = "250.5";
  EXPECT_EQ(ids(by_input), std::vector<std::string>{"b"});
  by_input.input_field = "vip";
  by_input.input_value = "true";
  EXPECT_EQ(ids(by_input), std::vector<std::string>{"a"});
  by_input.input_field = "note";
  by_input.input_value = "null";
  EXPECT_EQ(ids(by_input), std::vector<std::string>{"c"});
  by_input.input_field = "missing";
  EXPECT_TRUE(ids(by_input).empty());
}

TEST_F(StoreTest, ADeployedDefinitionIsImmutablePerVersionAndSeenByEveryProcess) {
  nlohmann::json v1 = {{"name", "pay"}, {"version", 1}, {"steps", nlohmann::json::array()}};
  nlohmann::json other = v1;
  other["deadline_ms"] = 5;
  EXPECT_TRUE(*store_->PutDefinition("pay", 1, v1));   // stored now
  EXPECT_FALSE(*store_->PutDefinition("pay", 1, v1));  // the same again
  EXPECT_EQ(store_->PutDefinition("pay", 1, other).status().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(*Second().PutDefinition("pay", 2, other));
  EXPECT_TRUE(*store_->PutDefinition("alpha", 10, v1));
  auto all = Second().ListDefinitions();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].name, "alpha");
  EXPECT_EQ((*all)[0].version, 10);
  EXPECT_EQ((*all)[1].name, "pay");
  EXPECT_EQ((*all)[1].version, 1);
  EXPECT_EQ((*all)[1].body, v1);
  EXPECT_EQ((*all)[2].version, 2);
  EXPECT_EQ((*all)[2].body, other);
}

// The asynchronous forms (the API's deploys and pauses: no thread waits
// for their writes) answer as the blocking ones do, once durable.
TEST_F(StoreTest, DeploysAndPausesCommitAsynchronouslyWithTheSameAnswers) {
  auto deploy = [&](const std::string& name, int version, const nlohmann::json& body) {
    auto got = std::make_shared<std::promise<StatusOr<bool>>>();
    store_->PutDefinitionAsync(name, version, body,
                               [got](StatusOr<bool> r) { got->set_value(std::move(r)); });
    auto f = got->get_future();
    EXPECT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return f.get();
  };
  auto pause = [&](const std::string& service, bool paused, const nlohmann::json& note) {
    auto got = std::make_shared<std::promise<Status>>();
    store_->SetServicePausedAsync(service, paused, note,
                                  [got](Status s) { got->set_value(std::move(s)); });
    auto f = got->get_future();
    EXPECT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return f.get();
  };
  nlohmann::json v1 = {{"name", "pay"}, {"version", 1}, {"steps", nlohmann::json::array()}};
  nlohmann::json other = v1;
  other["deadline_ms"] = 5;
  EXPECT_TRUE(*deploy("pay", 1, v1));
  EXPECT_FALSE(*deploy("pay", 1, v1));
  EXPECT_EQ(deploy("pay", 1, other).status().code(), StatusCode::kAlreadyExists);
  ASSERT_EQ(Second().ListDefinitions()->size(), 1u);
  EXPECT_EQ((*Second().ListDefinitions())[0].body, v1);
  const nlohmann::json ann = {{"by", "ann"}, {"reason", "incident"}, {"since", 1000}};
  ASSERT_TRUE(pause("payments", true, ann).ok());
  ASSERT_TRUE(pause("payments", true, {{"by", "bob"}}).ok());  // again: the first note stays
  EXPECT_EQ(*Second().PausedServices(), std::vector<std::string>{"payments"});
  EXPECT_EQ(*Second().PauseNotes(), (nlohmann::json{{"payments", ann}}));
  ASSERT_TRUE(pause("payments", false, nullptr).ok());
  EXPECT_TRUE(Second().PausedServices()->empty());
}

// A pause keeps who, why and since when: the first note while it lasts
// (pausing again changes nothing), none once resumed.
TEST_F(StoreTest, APauseIsDurableSharedAndIdempotentAndKeepsItsNote) {
  const nlohmann::json ann = {{"by", "ann"}, {"reason", "provider incident"}, {"since", 1000}};
  const nlohmann::json bob = {{"by", "bob"}, {"reason", ""}, {"since", 2000}};
  EXPECT_TRUE(store_->PausedServices()->empty());
  EXPECT_EQ(*store_->PauseNotes(), nlohmann::json::object());
  ASSERT_TRUE(store_->SetServicePaused("payments", true, ann).ok());
  ASSERT_TRUE(store_->SetServicePaused("payments", true, bob).ok());  // again: no change
  ASSERT_TRUE(store_->SetServicePaused("email", true, bob).ok());
  EXPECT_EQ(*store_->PausedServices(), (std::vector<std::string>{"email", "payments"}));
  EXPECT_EQ(*store_->PauseNotes(), (nlohmann::json{{"email", bob}, {"payments", ann}}));
  // Another process on the same store sees it.
  EXPECT_EQ(*Second().PausedServices(), (std::vector<std::string>{"email", "payments"}));
  EXPECT_EQ((*Second().PauseNotes())["payments"], ann);
  ASSERT_TRUE(Second().SetServicePaused("payments", false, nullptr).ok());
  ASSERT_TRUE(store_->SetServicePaused("never-paused", false, nullptr).ok());
  EXPECT_EQ(*store_->PausedServices(), (std::vector<std::string>{"email"}));
  EXPECT_EQ(*store_->PauseNotes(), (nlohmann::json{{"email", bob}}));
  // Paused again: the new note, not the one of the pause that ended.
  ASSERT_TRUE(store_->SetServicePaused("payments", true, bob).ok());
  EXPECT_EQ((*Second().PauseNotes())["payments"], bob);
}

TEST_F(StoreTest, OutboxRecordsCommitWithTheTransitionAndComeOutInOrder) {
  ASSERT_TRUE(
      store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {{{"n", 1}}}, nullptr).ok());
  ASSERT_TRUE(
      store_->Commit("a", 1, Snap("a", 2), {Ev(2, "x")}, {}, {{{"n", 2}}, {{"n", 3}}}, nullptr)
          .ok());
  EXPECT_FALSE(store_->Commit("a", 1, Snap("a", 2), {Ev(3, "y")}, {}, {{{"n", 99}}}, nullptr).ok());
  auto recs = store_->PeekOutbox(10);
  ASSERT_TRUE(recs.ok());
  ASSERT_EQ(recs->size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*recs)[i].message["n"], i + 1);
  ASSERT_TRUE(store_->AckOutbox((*recs)[0].seq).ok());
  EXPECT_EQ(*store_->OutboxSize(), 2u);
  EXPECT_EQ((*store_->PeekOutbox(1))[0].message["n"], 2);
#if SAGAD_STORE_BACKEND_POSTGRES
  // One publisher at a time: the second process sees nothing to publish
  // while the first holds the outbox.
  EXPECT_TRUE(Second().PeekOutbox(10)->empty());
  store_.reset();  // the first one goes away: the second takes over
  EXPECT_TRUE(testing::WaitFor([&] { return Second().PeekOutbox(10)->size() == 2u; }));
#endif
}

TEST_F(StoreTest, LeasesFenceCommitsAndChangeHandsOnlyWhenExpired) {
  Lease mine{"A", Now() + 60000, 1};
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {}, &mine).ok());
  EXPECT_EQ(store_->GetLease("a")->owner, "A");
  EXPECT_EQ(Second().AcquireLease("a", "B", clock_, 1000, "").status().code(),
            StatusCode::kLeaseLost);
  auto renewed = store_->AcquireLease("a", "A", clock_, 60000, "");
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ(renewed->generation, 1u);  // same owner, same generation
  EXPECT_GT(renewed->expires_at, Now() + 30000);
  // A lets it run out (1 ms); then, and only then, B may take it.
  ASSERT_TRUE(store_->AcquireLease("a", "A", clock_, 1, "").ok());
  StatusOr<Lease> taken = FailedPrecondition("not yet");
  ASSERT_TRUE(testing::WaitFor([&] {
    taken = Second().AcquireLease("a", "B", clock_, 60000, "");
    return taken.ok();
  }));
  EXPECT_EQ(taken->generation, 2u);
  // The old owner can no longer commit; the new one can.
  Status stale = store_->Commit("a", 1, Snap("a", 2), {Ev(2, "x")}, {}, {}, &mine);
  EXPECT_EQ(stale.code(), StatusCode::kLeaseLost) << stale.ToString();
  EXPECT_EQ(store_->GetEvents("a")->size(), 1u);  // the fenced commit wrote nothing
  EXPECT_TRUE(Second().Commit("a", 1, Snap("a", 2), {Ev(2, "x")}, {}, {}, &*taken).ok());
  auto lost = store_->RenewLeases("A", {"a"}, clock_, 1000);
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(*lost, std::vector<std::string>{"a"});
  EXPECT_TRUE(Second().RenewLeases("B", {"a"}, clock_, 60000)->empty());
  // Finishing releases the lease.
  EXPECT_TRUE(
      Second().Commit("a", 2, Snap("a", 3, "COMPLETED"), {Ev(3, "y")}, {}, {}, &*taken).ok());
  EXPECT_EQ(store_->GetLease("a").status().code(), StatusCode::kNotFound);
}

TEST_F(StoreTest, RecoveryTakesManyLeasesInOneGoButNotALiveOwnersOnes) {
  Lease live{"other/2", Now() + 60000, 3}, dead{"sagad/1", Now() + 60000, 4};
  ASSERT_TRUE(store_->CreateInstance(Snap("live", 1), {Ev(1, "c")}, nullptr, {}, &live).ok());
  ASSERT_TRUE(store_->CreateInstance(Snap("dead", 1), {Ev(1, "c")}, nullptr, {}, &dead).ok());
  ASSERT_TRUE(store_->CreateInstance(Snap("free", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  auto taken = store_->AcquireLeases({"live", "dead", "free"}, "sagad/2", clock_, 1000, "sagad/");
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->count("live"), 0u);          // another live process holds it
  EXPECT_EQ(taken->at("dead").generation, 5u);  // the predecessor's: taken at once
  EXPECT_EQ(taken->at("free").generation, 1u);
  EXPECT_EQ(store_->GetLease("live")->owner, "other/2");
  EXPECT_EQ(store_->GetLease("dead")->owner, "sagad/2");
}

TEST_F(StoreTest, RetentionDeletesWhatFinishedBeforeTheCutoffWithAllThatBelongsToIt) {
  auto snap = [&](const std::string& id, uint64_t v, const std::string& status, int64_t at) {
    nlohmann::json j = Snap(id, v, status);
    j["updated_at"] = at;
    j["steps"] = {{{"name", "s1"}}};
    return j;
  };
  Submission sub;
  sub.key = "k-old";
  sub.request_hash = "h";
  sub.instance_id = "old";
  ASSERT_TRUE(
      store_->CreateInstance(snap("old", 1, "RUNNING", 500), {Ev(1, "c")}, &sub, {}, nullptr).ok());
  OperationRecord op;
  op.key = "old:s1";
  op.instance_id = "old";
  op.state = "COMMITTED";
  ASSERT_TRUE(
      store_->Commit("old", 1, snap("old", 2, "COMPLETED", 1000), {Ev(2, "x")}, {op}, {}, nullptr)
          .ok());
  ASSERT_TRUE(store_
                  ->CreateInstance(snap("newer", 1, "COMPENSATED", 5000), {Ev(1, "c")}, nullptr, {},
                                   nullptr)
                  .ok());
  ASSERT_TRUE(
      store_->CreateInstance(snap("open", 1, "RUNNING", 100), {Ev(1, "c")}, nullptr, {}, nullptr)
          .ok());
  auto deleted = store_->DeleteFinished(2000, 10);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, std::vector<std::string>{"old"});
  EXPECT_EQ(store_->GetInstance("old").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->GetEvents("old")->empty());
  EXPECT_EQ(store_->GetOperation("old:s1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetSubmission("k-old").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->GetInstance("newer").ok());  // finished after the cutoff
  EXPECT_TRUE(store_->GetInstance("open").ok());   // not finished
  EXPECT_EQ(store_->GetEvents("open")->size(), 1u);
  EXPECT_TRUE(store_->DeleteFinished(2000, 10)->empty());
  EXPECT_EQ(*store_->DeleteFinished(6000, 10), std::vector<std::string>{"newer"});
  // The submission key is free again.
  sub.instance_id = "again";
  EXPECT_TRUE(
      store_->CreateInstance(snap("again", 1, "RUNNING", 7000), {Ev(1, "c")}, &sub, {}, nullptr)
          .ok());
}

TEST_F(StoreTest, SurvivesReopen) {
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  store_.reset();
  store_ = Open();
  ASSERT_TRUE(store_);
  EXPECT_TRUE(store_->GetInstance("a").ok());
  EXPECT_TRUE(store_->CheckWritable().ok());
}

// Regression: a write the store refuses (PostgreSQL cannot hold U+0000 in
// a text value; LMDB can) fails alone: the writes group-committed beside it
// are applied.
TEST_F(StoreTest, AWriteTheStoreRefusesFailsAloneAndTheRestOfItsBatchIsApplied) {
  constexpr int kWriters = 24;
  std::vector<std::thread> writers;
  std::vector<Status> results(kWriters);
  std::atomic<bool> go{false};
  for (int i = 0; i < kWriters; ++i)
    writers.emplace_back([&, i] {
      while (!go) std::this_thread::yield();
      nlohmann::json snap = Snap("w" + std::to_string(i), 1);
      if (i % 6 == 0) snap["saga"] = std::string("bad\0saga", 8);
      results[i] = store_->CreateInstance(snap, {Ev(1, "instance_created")}, nullptr, {}, nullptr);
    });
  go = true;
  for (auto& t : writers) t.join();
  for (int i = 0; i < kWriters; ++i) {
    if (i % 6 == 0) continue;
    EXPECT_TRUE(results[i].ok()) << i << ": " << results[i].ToString();
    EXPECT_TRUE(store_->GetInstance("w" + std::to_string(i)).ok()) << i;
  }
}

}  // namespace
}  // namespace sagad
