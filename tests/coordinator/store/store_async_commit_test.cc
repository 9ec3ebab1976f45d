// Store::CommitAsync, in the conformance suite of every backend: the same
// answers as Commit (compare-and-swap, fencing), each `done` called once and
// only after its write is durable, whoever else writes at the same time.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "tests/coordinator/store/store_test_fixture.h"
#include "util/mutex.h"

namespace sagad {
namespace {

// The answers of CommitAsync calls, waited for with a deadline.
class Answers {
 public:
  std::function<void(Status)> Slot(int i) {
    return [this, i](Status s) {
      MutexLock l(mu_);
      got_[i].push_back(std::move(s));
      cv_.NotifyAll();
    };
  }
  // True once `n` slots have an answer (within 10 s).
  bool Wait(size_t n) {
    MutexLock l(mu_);
    return cv_.WaitFor(mu_, std::chrono::seconds(10),
                       [&]() REQUIRES(mu_) { return got_.size() >= n; });
  }
  std::vector<Status> Of(int i) {
    MutexLock l(mu_);
    return got_[i];
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::map<int, std::vector<Status>> got_ GUARDED_BY(mu_);
};

std::shared_ptr<TransitionWrite> Write(const std::string& id, uint64_t expected,
                                       const nlohmann::json& snap, std::vector<Event> events,
                                       const Lease* fence = nullptr) {
  auto w = std::make_shared<TransitionWrite>();
  w->id = id;
  w->expected_version = expected;
  w->snapshot = SnapshotRecord::FromJson(snap);
  w->events = std::move(events);
  if (fence) w->fence = *fence;
  return w;
}

TEST_F(StoreTest, CommitAsyncAnswersAsCommitWouldOnceTheWriteIsDurable) {
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  Answers answers;
  store_->CommitAsync(Write("a", 1, Snap("a", 2), {Ev(2, "x")}), answers.Slot(0));
  ASSERT_TRUE(answers.Wait(1));
  ASSERT_EQ(answers.Of(0).size(), 1u);
  EXPECT_TRUE(answers.Of(0)[0].ok()) << answers.Of(0)[0].ToString();
  EXPECT_EQ(Second().GetInstance("a")->value("version", 0), 2);  // durable: seen by another
  store_->CommitAsync(Write("a", 1, Snap("a", 2), {Ev(3, "stale")}), answers.Slot(1));
  ASSERT_TRUE(answers.Wait(2));
  EXPECT_EQ(answers.Of(1)[0].code(), StatusCode::kAborted);
  EXPECT_EQ(store_->GetEvents("a")->size(), 2u);  // the losing write wrote nothing
}

// CreateInstanceAsync: the instance, its key and first lease in one write,
// answered as CreateInstance would; a second instance under the same key
// (or the same id) is AlreadyExists and writes nothing.
TEST_F(StoreTest, CreateInstanceAsyncAnswersAsCreateInstanceWould) {
  auto create = [this](const std::string& id, const std::string& key) {
    auto w = std::make_shared<CreationWrite>();
    w->snapshot = Snap(id, 1);
    w->events = {Ev(1, "c")};
    w->submission.emplace();
    w->submission->key = key;
    w->submission->request_hash = "h";
    w->submission->instance_id = id;
    w->submission->created_at = 1;
    return w;
  };
  Answers answers;
  store_->CreateInstanceAsync(create("a", "k1"), answers.Slot(0));
  store_->CreateInstanceAsync(create("b", "k1"), answers.Slot(1));  // the key again
  store_->CreateInstanceAsync(create("a", "k2"), answers.Slot(2));  // the id again
  ASSERT_TRUE(answers.Wait(3));
  ASSERT_EQ(answers.Of(0).size(), 1u);
  EXPECT_TRUE(answers.Of(0)[0].ok()) << answers.Of(0)[0].ToString();
  EXPECT_EQ(answers.Of(1)[0].code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(answers.Of(2)[0].code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->GetSubmission("k1")->instance_id, "a");
  EXPECT_EQ(store_->GetInstance("b").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetSubmission("k2").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetEvents("a")->size(), 1u);
}

TEST_F(StoreTest, CommitAsyncIsFencedByTheLease) {
  ASSERT_TRUE(store_->CreateInstance(Snap("a", 1), {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  auto held = store_->AcquireLease("a", "east", clock_, 60000, "");
  ASSERT_TRUE(held.ok());
  Lease stale = *held;
  stale.generation -= 1;
  Answers answers;
  store_->CommitAsync(Write("a", 1, Snap("a", 2), {Ev(2, "x")}, &stale), answers.Slot(0));
  store_->CommitAsync(Write("a", 1, Snap("a", 2), {Ev(2, "x")}, &*held), answers.Slot(1));
  ASSERT_TRUE(answers.Wait(2));
  EXPECT_EQ(answers.Of(0)[0].code(), StatusCode::kLeaseLost);
  EXPECT_TRUE(answers.Of(1)[0].ok()) << answers.Of(1)[0].ToString();
}

// Blocking and asynchronous writers of many instances at once: every
// asynchronous write answered once, each answer its own, all of it stored.
TEST_F(StoreTest, AsyncAndBlockingWritersMixAndEachGetsItsOwnAnswerOnce) {
  constexpr int kInstances = 8, kRounds = 20;
  for (int t = 0; t < kInstances; ++t)
    ASSERT_TRUE(
        store_->CreateInstance(Snap("i" + std::to_string(t), 1), {Ev(1, "c")}, nullptr, {}, nullptr)
            .ok());
  Answers answers;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kInstances; ++t)
    threads.emplace_back([&, t] {
      std::string id = "i" + std::to_string(t);
      for (uint64_t v = 1; v <= kRounds; ++v) {
        if (t % 2 == 0) {  // blocking
          if (!store_->Commit(id, v, Snap(id, v + 1), {Ev(int64_t(v) + 1, "x")}, {}, {}, nullptr)
                   .ok())
            ++wrong;
          continue;
        }
        // Asynchronous, without waiting: a stale write, then the right one
        // (queued in that order, applied in that order).
        int slot = t * 1000 + int(v) * 2;
        store_->CommitAsync(Write(id, v - 1, Snap(id, v), {Ev(int64_t(v) + 1, "stale")}),
                            answers.Slot(slot));
        store_->CommitAsync(Write(id, v, Snap(id, v + 1), {Ev(int64_t(v) + 1, "x")}),
                            answers.Slot(slot + 1));
      }
    });
  for (auto& th : threads) th.join();
  const size_t async_writes = (kInstances / 2) * kRounds * 2;
  ASSERT_TRUE(answers.Wait(async_writes));
  for (int t = 1; t < kInstances; t += 2)
    for (int v = 1; v <= kRounds; ++v) {
      int slot = t * 1000 + v * 2;
      ASSERT_EQ(answers.Of(slot).size(), 1u);
      ASSERT_EQ(answers.Of(slot + 1).size(), 1u);
      EXPECT_EQ(answers.Of(slot)[0].code(), StatusCode::kAborted) << "instance " << t << " v" << v;
      EXPECT_TRUE(answers.Of(slot + 1)[0].ok()) << answers.Of(slot + 1)[0].ToString();
    }
  EXPECT_EQ(wrong.load(), 0);
  auto reopened = Open();  // everything answered is stored
  for (int t = 0; t < kInstances; ++t) {
    std::string id = "i" + std::to_string(t);
    EXPECT_EQ(Second().GetInstance(id)->value("version", 0), kRounds + 1);
    EXPECT_EQ(Second().GetEvents(id)->size(), size_t(kRounds) + 1);
  }
}

}  // namespace
}  // namespace sagad
