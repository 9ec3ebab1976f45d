// InstanceRepository over a real LMDB store; two repositories on one store
// are two processes (or an operator's action racing the driver).
#include "coordinator/engine/instances/instance_repository.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "coordinator/engine/owners/asio_executor.h"
#include "examples/examples.h"
#include "tests/testing/forwarding_store.h"
#include "tests/testing/store_fixture.h"
#include "util/mutex.h"

namespace sagad {
namespace {

class InstanceRepositoryTest : public testing::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    def_ = IncidentResponse();
    repo_ = Make(&commits_);
    Instance inst;
    Event created = Instance::CreatedEvent("i1", def_, {{"title", "t"}});
    created.seq = 1;
    created.at_ms = clock_.NowMillis();
    ASSERT_TRUE(inst.Apply(created).ok());
    inst.set_version(1);
    ASSERT_TRUE(repo_->Create(inst, {created}, {}, nullptr, nullptr).ok());
    EXPECT_EQ(commits_, std::vector<std::string>{"instance_created"});  // hooks run for it too
    commits_.clear();
  }
  // Records the events of each commit in *seen and the log's messages.
  class Listener : public InstanceRepository::Listener {
   public:
    Listener(std::vector<std::string>* seen, std::vector<std::string>* logs)
        : seen_(seen), logs_(logs) {}
    void Committed(const InstanceRepository::Commit& c) override {
      for (const Event& e : *c.events) seen_->push_back(e.type);
    }
    void Log(LogLevel, nlohmann::json line) override { logs_->push_back(line.value("msg", "")); }

   private:
    std::vector<std::string>* seen_;
    std::vector<std::string>* logs_;
  };
  std::unique_ptr<InstanceRepository> Make(std::vector<std::string>* seen) {
    listeners_.push_back(std::make_unique<Listener>(seen, &logs_));
    return std::make_unique<InstanceRepository>(*store_, clock_, listeners_.back().get());
  }
  static std::function<Status(Tx&)> StartStep(int i) {
    return [i](Tx& tx) {
      return tx.Step(i, StepEvent::kStart, {{"key", "k" + std::to_string(i)}});
    };
  }

  // Commits step 0 if it is STARTED, else notes a stale answer; counts its
  // calls (a lost race applies it again).
  static std::function<Status(Tx&)> CommitOnceStarted(int* calls) {
    return [calls](Tx& tx) -> Status {
      ++*calls;
      if (tx.inst().step(0).status() != StepStatus::kStarted)
        return tx.Note(0, StepNote::kReconciled, {{"answer", "stale"}});
      return tx.Step(0, StepEvent::kCommit, {{"external_ref", "T-1"}});
    };
  }

  SagaDefinition def_;
  std::vector<std::string> commits_, logs_;
  std::vector<std::unique_ptr<Listener>> listeners_;  // outlive the repositories
  std::unique_ptr<InstanceRepository> repo_;
};

TEST_F(InstanceRepositoryTest, CreatedInstanceIsCachedAndStored) {
  EXPECT_EQ(repo_->CachedVersion("i1"), 1u);
  auto inst = repo_->Load("i1");
  ASSERT_TRUE(inst.ok());
  EXPECT_EQ((*inst)->status(), SagaStatus::kRunning);
  auto snap = store_->GetInstance("i1");
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->value("version", 0), 1);
  EXPECT_TRUE(logs_.empty());  // served from the cache, no replay
}

// Found by the simulator (seed 4349): a read that cached an instance hid a
// change from the heartbeat, which plans again an owned instance whose
// stored version differs from the cached one.
TEST_F(InstanceRepositoryTest, AReaderNeverFillsTheCache) {
  repo_->Evict("i1");
  auto inst = repo_->Peek("i1");
  ASSERT_TRUE(inst.ok());
  EXPECT_EQ((*inst)->version(), 1u);
  EXPECT_EQ(repo_->CachedVersion("i1"), 0u);  // still not cached
  ASSERT_TRUE(repo_->Load("i1").ok());
  EXPECT_EQ(repo_->CachedVersion("i1"), 1u);
  EXPECT_TRUE(repo_->Peek("i1").ok());  // a cached copy is served and kept
  EXPECT_EQ(repo_->CachedVersion("i1"), 1u);
}

TEST_F(InstanceRepositoryTest, LoadReplaysTheLogWhenNotCached) {
  repo_->Evict("i1");
  EXPECT_EQ(repo_->CachedVersion("i1"), 0u);
  auto inst = repo_->Load("i1");
  ASSERT_TRUE(inst.ok());
  EXPECT_EQ((*inst)->version(), 1u);
  EXPECT_EQ(logs_, std::vector<std::string>{"replayed"});
  EXPECT_EQ(repo_->Load("nope").status().code(), StatusCode::kNotFound);
}

TEST_F(InstanceRepositoryTest, MutateCommitsACopyAndLeavesReadersTheirs) {
  auto before = repo_->Load("i1");
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(repo_->Mutate("i1", StartStep(0), nullptr).ok());
  EXPECT_EQ((*before)->step(0).status(), StepStatus::kPlanned);  // unchanged
  auto after = repo_->Load("i1");
  EXPECT_EQ((*after)->step(0).status(), StepStatus::kStarted);
  EXPECT_EQ((*after)->version(), 2u);
  EXPECT_EQ(commits_, std::vector<std::string>{"started"});
  auto op = store_->GetOperation("k0");
  ASSERT_TRUE(op.ok());  // the operation record rode in the same commit
  EXPECT_EQ(op->state, "STARTED");
}

TEST_F(InstanceRepositoryTest, NoEventsNoCommitAndAFailedTransitionLeavesNoTrace) {
  ASSERT_TRUE(repo_
                  ->Mutate(
                      "i1", [](Tx&) { return Status::Ok(); }, nullptr)
                  .ok());
  Status s = repo_->Mutate(
      "i1",
      [](Tx& tx) -> Status {
        SAGAD_RETURN_IF_ERROR(tx.Step(0, StepEvent::kStart));
        return FailedPrecondition("changed my mind");
      },
      nullptr);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(commits_.empty());
  EXPECT_EQ((*repo_->Load("i1"))->step(0).status(), StepStatus::kPlanned);
  EXPECT_EQ(store_->GetInstance("i1")->value("version", 0), 1);
  // The state machines refuse an event that does not fit.
  EXPECT_FALSE(repo_
                   ->Mutate(
                       "i1", [](Tx& tx) { return tx.Step(0, StepEvent::kCommit); }, nullptr)
                   .ok());
}

// A transition decided on a copy the instance has moved past may name a step
// it does not hold (found by the simulator at one call site, seed 26 of the
// lying-fsync bug): it is refused as MovedOn, for every call site, and
// commits nothing; reading such a step is a check that aborts.
TEST_F(InstanceRepositoryTest, AStepTheInstanceDoesNotHoldIsMovedOnAndCommitsNothing) {
  const int beyond = static_cast<int>(def_.steps.size());
  for (int i : {beyond, beyond + 7, -1}) {
    Status s = repo_->Mutate(
        "i1",
        [i](Tx& tx) {
          return tx.Step(i, StepEvent::kStart, {{"key", "k"}});
        },
        nullptr);
    EXPECT_EQ(s.code(), StatusCode::kMovedOn) << i << ": " << s.ToString();
    s = repo_->Mutate(
        "i1", [i](Tx& tx) { return tx.Note(i, StepNote::kReconciled, {}); }, nullptr);
    EXPECT_EQ(s.code(), StatusCode::kMovedOn) << i << ": " << s.ToString();
  }
  EXPECT_TRUE(commits_.empty());
  EXPECT_EQ(store_->GetInstance("i1")->value("version", 0), 1);
  auto inst = *repo_->Load("i1");
  EXPECT_DEATH((void)inst->step(static_cast<size_t>(beyond)), "has no step");
}

TEST_F(InstanceRepositoryTest, ALostRaceReloadsAndAppliesTheTransitionAgain) {
  std::vector<std::string> other_commits;
  auto other = Make(&other_commits);    // another process on the same store
  ASSERT_TRUE(repo_->Load("i1").ok());  // cached at version 1 here
  ASSERT_TRUE(other->Mutate("i1", StartStep(0), nullptr).ok());
  int calls = 0;
  Status s = repo_->Mutate("i1", CommitOnceStarted(&calls), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(calls, 2);  // applied to version 1, refused, applied to version 2
  auto now = repo_->Load("i1");
  EXPECT_EQ((*now)->version(), 3u);
  EXPECT_EQ((*now)->step(0).status(), StepStatus::kCommitted);
  EXPECT_EQ(commits_, std::vector<std::string>{"committed"});
}

TEST_F(InstanceRepositoryTest, AFencedCommitIsRefusedAndDropped) {
  auto mine = store_->AcquireLease("i1", "east/1", clock_, 3000, "");
  ASSERT_TRUE(mine.ok());
  clock_.Advance(4000);
  auto theirs = store_->AcquireLease("i1", "west/1", clock_, 3000, "");
  ASSERT_TRUE(theirs.ok());
  Status s = repo_->Mutate("i1", StartStep(0), &*mine);
  EXPECT_EQ(s.code(), StatusCode::kLeaseLost) << s.ToString();
  EXPECT_EQ(repo_->CachedVersion("i1"), 0u);
  EXPECT_TRUE(commits_.empty());
  EXPECT_TRUE(repo_->Mutate("i1", StartStep(0), &*theirs).ok());
}

TEST_F(InstanceRepositoryTest, AFinishedInstanceIsNotKeptInTheCache) {
  ASSERT_TRUE(repo_
                  ->Mutate(
                      "i1",
                      [](Tx& tx) {
                        return tx.Saga(SagaEvent::kStartCompensation, {{"reason", "test"}});
                      },
                      nullptr)
                  .ok());
  ASSERT_TRUE(repo_
                  ->Mutate(
                      "i1", [](Tx& tx) { return tx.Saga(SagaEvent::kFinishCompensation); }, nullptr)
                  .ok());
  EXPECT_EQ(repo_->CachedVersion("i1"), 0u);
  auto inst = repo_->Load("i1");
  ASSERT_TRUE(inst.ok());
  EXPECT_EQ((*inst)->status(), SagaStatus::kCompensated);
}

// MutateAsync: what Mutate does, completed by the store's CommitAsync.
class MutateAsyncTest : public InstanceRepositoryTest {
 protected:
  // Waits (with a deadline) for the answer of the MutateAsync that `done`
  // was made for.
  struct Answer {
    Mutex mu;
    CondVar cv;
    std::optional<Status> got GUARDED_BY(mu);
    std::function<void(Status)> Done() {
      return [this](Status s) {
        MutexLock l(mu);
        got = s;
        cv.NotifyAll();
      };
    }
    std::optional<Status> Wait() {
      MutexLock l(mu);
      cv.WaitFor(mu, std::chrono::seconds(10), [&]() REQUIRES(mu) { return got.has_value(); });
      return got;
    }
  };
};

TEST_F(MutateAsyncTest, CompletesOnceTheCommitIsDurableAndRunsTheCommittedHookFirst) {
  Answer a;
  repo_->MutateAsync("i1", StartStep(0), std::nullopt, a.Done());
  auto s = a.Wait();
  ASSERT_TRUE(s) << "never completed";
  ASSERT_TRUE(s->ok()) << s->ToString();
  EXPECT_EQ(commits_, std::vector<std::string>{"started"});
  EXPECT_EQ(store_->GetInstance("i1")->value("version", 0), 2);
  EXPECT_EQ(repo_->CachedVersion("i1"), 2u);
  EXPECT_EQ(store_->GetOperation("k0")->state, "STARTED");
}

TEST_F(MutateAsyncTest, ALostRaceReloadsAndAFenceRefuses) {
  std::vector<std::string> other_commits;
  auto other = Make(&other_commits);
  ASSERT_TRUE(repo_->Load("i1").ok());  // cached at version 1 here
  ASSERT_TRUE(other->Mutate("i1", StartStep(0), nullptr).ok());
  int calls = 0;
  Answer a;
  repo_->MutateAsync("i1", CommitOnceStarted(&calls), std::nullopt, a.Done());
  auto s = a.Wait();
  ASSERT_TRUE(s && s->ok()) << (s ? s->ToString() : "never completed");
  EXPECT_EQ(calls, 2);  // applied to version 1, refused, applied to version 2
  EXPECT_EQ((*repo_->Load("i1"))->step(0).status(), StepStatus::kCommitted);

  auto mine = store_->AcquireLease("i1", "east/1", clock_, 3000, "");
  ASSERT_TRUE(mine.ok());
  clock_.Advance(4000);
  ASSERT_TRUE(store_->AcquireLease("i1", "west/1", clock_, 3000, "").ok());
  Answer fenced;
  repo_->MutateAsync("i1", StartStep(1), *mine, fenced.Done());
  s = fenced.Wait();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->code(), StatusCode::kLeaseLost) << s->ToString();
  EXPECT_EQ(repo_->CachedVersion("i1"), 0u);  // dropped
}

// An instance's transitions never interleave: one that asks while another
// holds the instance's turn waits for it, blocking or not, in order.
TEST_F(MutateAsyncTest, TransitionsOfOneInstanceTakeTurnsInTheOrderTheyAsked) {
  InstanceTurns turns;
  std::vector<std::string> order;
  turns.Take("x");
  turns.TakeAsync("x", [&] {
    order.push_back("async");
    turns.End("x");
  });
  std::thread blocking([&] {
    turns.Take("x");
    order.push_back("blocking");
    turns.End("x");
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (turns.Waiting("x") < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  ASSERT_EQ(turns.Waiting("x"), 2u);
  EXPECT_TRUE(order.empty());  // nothing ran while the turn was held
  turns.End("x");
  blocking.join();
  EXPECT_EQ(order, (std::vector<std::string>{"async", "blocking"}));
  EXPECT_EQ(turns.Waiting("x"), 0u);
  turns.TakeAsync("x", [&] { order.push_back("free"); });  // nobody holds it: at once
  EXPECT_EQ(order.back(), "free");
  turns.End("x");
}

// A store whose asynchronous commits wait until the test lets them go.
class HeldCommitsStore : public testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  void CommitAsync(std::shared_ptr<const TransitionWrite> w,
                   std::function<void(Status)> done) override {
    held_.push_back([this, w, done] { ForwardingStore::CommitAsync(w, done); });
  }
  size_t held() const { return held_.size(); }
  void Release() {
    auto held = std::move(held_);
    for (auto& f : held) f();
  }

 private:
  std::vector<std::function<void()>> held_;
};

// A reader of an instance whose transition holds its turn across a commit
// does not wait for that commit (it would be a thread waiting for a commit,
// and on one thread a deadlock): it gets the copy last committed, and a
// copy it reads from the store is not cached over what the commit caches.
TEST_F(MutateAsyncTest, ALoadWhileATransitionCommitsAnswersTheLastCommittedCopyWithoutWaiting) {
  HeldCommitsStore held(*store_);
  InstanceRepository repo(held, clock_, {});
  ASSERT_EQ((*repo.Load("i1"))->version(), 1u);  // cached
  Answer a;
  repo.MutateAsync("i1", StartStep(0), std::nullopt, a.Done());
  ASSERT_EQ(held.held(), 1u);     // the turn is held across the commit
  auto during = repo.Load("i1");  // on this same thread: must not wait
  ASSERT_TRUE(during.ok()) << during.status().ToString();
  EXPECT_EQ((*during)->version(), 1u);
  EXPECT_EQ((*during)->step(0).status(), StepStatus::kPlanned);
  repo.Evict("i1");  // uncached: read from the store, not cached
  during = repo.Load("i1");
  ASSERT_TRUE(during.ok());
  EXPECT_EQ((*during)->version(), 1u);
  EXPECT_EQ(repo.CachedVersion("i1"), 0u);
  held.Release();
  auto s = a.Wait();
  ASSERT_TRUE(s && s->ok()) << (s ? s->ToString() : "never completed");
  EXPECT_EQ(repo.CachedVersion("i1"), 2u);
  EXPECT_EQ((*repo.Load("i1"))->step(0).status(), StepStatus::kStarted);
}

// With an owner to post to (the engine's executor), every `done` runs on
// the instance's owner thread: after a commit, and also when nothing was
// to commit (a refused transition), which completes on whichever thread
// asked, or ended the turn before, if it is not handed over.
TEST_F(MutateAsyncTest, EveryCompletionRunsOnTheInstancesOwnerEvenWithNothingToCommit) {
  AsioExecutor owners(4);
  InstanceRepository repo(*store_, clock_, nullptr, &owners);  // as the engine's
  std::atomic<int> on_owner{0}, off_owner{0};
  auto check = [&](Answer& a) {
    auto done = a.Done();
    return [&, done](Status s) {
      (owners.OnOwner("i1") ? on_owner : off_owner)++;
      done(s);
    };
  };
  Answer refused, committed;
  repo.MutateAsync(
      "i1", [](Tx&) { return InvalidArgument("refused"); }, std::nullopt, check(refused));
  repo.MutateAsync("i1", StartStep(0), std::nullopt, check(committed));
  auto r = refused.Wait();
  auto c = committed.Wait();
  ASSERT_TRUE(r && c) << "never completed";
  EXPECT_EQ(r->code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(c->ok()) << c->ToString();
  repo.WaitIdle();
  EXPECT_EQ(on_owner, 2);
  EXPECT_EQ(off_owner, 0);
}

}  // namespace
}  // namespace sagad
