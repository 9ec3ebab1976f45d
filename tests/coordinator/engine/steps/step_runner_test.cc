// StepRunner over a real LMDB store and InstanceRepository. The downstream
// is a ScriptedDownstream (the boundary, not the thing under test): it
// answers as told and, at each call, reads the store to check that the
// STARTED record of the request is already durable.
#include "coordinator/engine/steps/step_runner.h"

#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <thread>
#include <utility>

#include "coordinator/engine/instances/instance_repository.h"
#include "coordinator/engine/owners/asio_executor.h"
#include "examples/examples.h"
#include "policies/planner.h"
#include "tests/testing/forwarding_store.h"
#include "tests/testing/scripted_downstream.h"
#include "tests/testing/store_fixture.h"
#include "tests/testing/subprocess.h"
#include "util/thread_role.h"

namespace sagad {
namespace {

using testing::ScriptedDownstream;

// The real store, except that while `refuse` is set it refuses (as
// PostgreSQL refuses a value it cannot hold) every commit that records a
// step's outcome ("committed").
class RefusingStore : public testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::atomic<bool> refuse{false};
  std::atomic<int> refused{0};
  Status Commit(const std::string& id, uint64_t expected_version, const nlohmann::json& snapshot,
                const std::vector<Event>& events, const std::vector<OperationRecord>& operations,
                const std::vector<nlohmann::json>& outbox, const Lease* lease) override {
    for (const Event& e : events)
      if (refuse && e.type == "committed") {
        ++refused;
        return Internal("postgresql: ERROR: unsupported Unicode escape sequence");
      }
    return real_.Commit(id, expected_version, snapshot, events, operations, outbox, lease);
  }
  // Synchronously, through Commit above (Store's default): the runner's
  // actions end before they return, as these tests expect. A commit done
  // inside the call is no wait for a commit to come (util/thread_role.h),
  // even on the executor's worker, where a reply's continuation runs.
  void CommitAsync(std::shared_ptr<const TransitionWrite> w,
                   std::function<void(Status)> done) override {
    ScopedThreadRole inline_commit(ThreadRole::kUnmarked);
    Store::CommitAsync(std::move(w), std::move(done));
  }
};

class StepRunnerTest : public testing::StoreFixture {
 protected:
  // The runner's host: a lost race plans again, anything else stops; plans
  // and delays are recorded; commits go through the repository.
  class Host final : public StepRunner::Host {
   public:
    explicit Host(StepRunnerTest& t) : t_(t) {}
    Next AfterFailedCommit(const std::string&, const Status& s) override {
      return s.code() == StatusCode::kMovedOn ? Next::kContinue : Next::kStop;
    }
    void Schedule(const std::string& id) override { t_.scheduled_.push_back(id); }
    void ScheduleAfter(const std::string& id, int64_t ms) override {
      t_.later_.push_back({id, ms});
    }
    void MarkRecovered(const std::string&) override {}
    bool RecoveryInProgress() override { return false; }
    Status MaySend(const std::string& id) override { return t_.ownership_->ReadyToSend(id); }
    void CommitAsOwnerAsync(const std::string& id, std::function<Status(Tx&)> fn,
                            std::function<void(Status)> done) override {
      ++t_.commits_;
      ++t_.async_commits_;
      auto lease = t_.ownership_->Held(id);
      t_.repo_->MutateAsync(id, std::move(fn), lease, [this, done](Status s) {
        if (t_.after_commit_) std::exchange(t_.after_commit_, nullptr)();
        done(s);
      });
    }

   private:
    StepRunnerTest& t_;
  };

  void SetUp() override {
    StoreFixture::SetUp();
    def_ = OrderFulfilment();
    downstream_ = std::make_unique<ScriptedDownstream>(
        *store_, std::vector<std::string>{"inventory", "payments", "shipping"});
    refusing_ = std::make_unique<RefusingStore>(*store_);
    repo_ = std::make_unique<InstanceRepository>(*refusing_, clock_);
    ownership_ = std::make_unique<Ownership>(*store_, clock_, "east", 3000);
    gates_ = std::make_unique<ServiceGates>(*downstream_, clock_);
    runner_ = std::make_unique<StepRunner>(*downstream_, clock_, *ownership_, runs_, metrics_,
                                           *gates_, executor_, host_);
    Instance inst;
    Event created = Instance::CreatedEvent("o1", def_,
                                           {{"sku", "A"},
                                            {"qty", 1},
                                            {"amount", 5},
                                            {"currency", "EUR"},
                                            {"customer", "c"},
                                            {"address", "x"}});
    created.seq = 1;
    ASSERT_TRUE(inst.Apply(created).ok());
    inst.set_version(1);
    Lease lease = ownership_->FirstLease();
    ASSERT_TRUE(repo_->Create(inst, {created}, {}, nullptr, &lease).ok());
    ownership_->Adopt("o1", lease);
  }
  std::shared_ptr<const Instance> Now() { return *repo_->Load("o1"); }
  // The scripted downstream answers at once: every action ends before it
  // returns. It holds step i's mark, as the driver's actions do, until it
  // ends.
  using Action = void (StepRunner::*)(const std::string&, const SagaDefinitionPtr&,
                                      const StepRunner::InstancePtr&, int,
                                      const StepRunner::MarkPtr&, StepRunner::Done);
  Next Run(Action action, std::shared_ptr<const Instance> inst, int i) {
    auto mark = std::make_shared<StepMark>(runs_.TryMarkStep("o1", i, def_.max_parallel));
    EXPECT_TRUE(*mark) << "step " << i << " is under way already";
    std::optional<Next> next;
    (runner_.get()->*action)("o1", std::make_shared<const SagaDefinition>(def_), inst, i, mark,
                             [&](Next n) {
                               EXPECT_FALSE(next) << "an action ended twice";
                               next = n;
                             });
    EXPECT_TRUE(next) << "the action did not end before it returned";
    return next.value_or(Next::kStop);
  }
  // Executes step 0 (holding its mark, returned) with a downstream that
  // keeps its calls (`defer`): the action waits for the first reply;
  // *ended counts its ends.
  StepRunner::MarkPtr ExecuteDeferred(std::atomic<int>* ended) {
    downstream_->defer = true;
    auto mark = std::make_shared<StepMark>(runs_.TryMarkStep("o1", 0, def_.max_parallel));
    EXPECT_TRUE(*mark);
    runner_->Execute("o1", std::make_shared<const SagaDefinition>(def_), Now(), 0, mark,
                     [ended](Next) { ++*ended; });
    return mark;
  }
  Next Execute(int i) { return Run(&StepRunner::Execute, Now(), i); }
  Next Reconcile(std::shared_ptr<const Instance> inst, int i) {
    return Run(&StepRunner::Reconcile, inst, i);
  }
  Next Compensate(std::shared_ptr<const Instance> inst, int i) {
    return Run(&StepRunner::Compensate, inst, i);
  }

  SagaDefinition def_;
  std::unique_ptr<ScriptedDownstream> downstream_;
  std::unique_ptr<RefusingStore> refusing_;
  std::unique_ptr<InstanceRepository> repo_;
  std::unique_ptr<Ownership> ownership_;
  RunTable runs_;
  EngineMetrics metrics_;
  std::unique_ptr<ServiceGates> gates_;
  std::vector<std::pair<std::string, int64_t>> later_;  // ScheduleAfter
  Host host_{*this};
  std::unique_ptr<StepRunner> runner_;
  // Where a reply that comes after its call returned goes on; stopped (its
  // queue run) before the runner goes.
  AsioExecutor executor_{1};
  int commits_ = 0;        // blocking and asynchronous
  int async_commits_ = 0;  // through CommitAsOwnerAsync
  std::vector<std::string> scheduled_;
  std::function<void()> after_commit_;  // once, after the next commit
};

TEST_F(StepRunnerTest, EachRequestLeavesOnlyAfterItsStartedRecordIsDurableOneCommitPerStep) {
  EXPECT_EQ(Execute(0), Next::kContinue);
  ASSERT_EQ(downstream_->calls.size(), 3u);  // the next steps were chained
  EXPECT_EQ(downstream_->durable_before_send, std::vector<bool>({true, true, true}));
  EXPECT_EQ(downstream_->calls[0].idempotency_key, "o1:reserve_inventory");
  EXPECT_EQ(downstream_->calls[0].fencing_token, ownership_->Token("o1"));
  EXPECT_EQ(downstream_->calls[1].path, "/charges");
  auto inst = Now();
  EXPECT_EQ(inst->status(), SagaStatus::kCompleted);
  EXPECT_EQ(inst->step(0).external_ref, "R-reserve_inventory");
  // STARTED, then each outcome with the next STARTED (the last with the
  // saga's completion): 4 commits for 3 steps.
  EXPECT_EQ(commits_, 4);
  EXPECT_FALSE(runs_.StepUnderWay("o1", 1));  // chained steps are unmarked
  EXPECT_FALSE(runs_.StepUnderWay("o1", 2));
}

// An adapter with an event loop answers later, on its own thread: the action
// returns without waiting, its step stays marked under way, and the reply
// (on the adapter's thread) records the outcome, chains the next steps and
// ends the action once.
TEST_F(StepRunnerTest, AnActionWaitingForAReplyHoldsNoThreadAndEndsOnTheInstancesOwner) {
  downstream_->defer = true;
  auto mark = std::make_shared<StepMark>(runs_.TryMarkStep("o1", 0, def_.max_parallel));
  ASSERT_TRUE(*mark);
  std::atomic<int> ended{0};
  std::atomic<bool> on_owner{false};
  Next next = Next::kStop;
  runner_->Execute("o1", std::make_shared<const SagaDefinition>(def_), Now(), 0, mark, [&](Next n) {
    next = n;
    on_owner = executor_.OnOwner("o1");
    ++ended;
  });
  EXPECT_EQ(ended, 0);  // returned without its reply
  ASSERT_EQ(downstream_->deferred.size(), 1u);
  EXPECT_EQ(Now()->step(0).status(), StepStatus::kStarted);   // durable before it left
  EXPECT_TRUE(runs_.StepUnderWay("o1", 0));                   // nobody may reconcile it yet
  downstream_->defer = false;                                 // the chained steps answer at once
  std::thread([&] { downstream_->deferred[0](); }).join();    // the reply, on another thread
  ASSERT_TRUE(testing::WaitFor([&] { return ended == 1; }));  // ... goes on on the owner's
  EXPECT_TRUE(on_owner);
  EXPECT_EQ(next, Next::kContinue);
  EXPECT_EQ(downstream_->calls.size(), 3u);
  EXPECT_EQ(Now()->status(), SagaStatus::kCompleted);
  // Each mark let go of once its step's outcome was recorded (the last one
  // after the action ended, on the owner).
  EXPECT_TRUE(testing::WaitFor([&] {
    return !runs_.StepUnderWay("o1", 0) && !runs_.StepUnderWay("o1", 1) &&
           !runs_.StepUnderWay("o1", 2);
  }));
}

// A chain that waits for a reply holds one mark, its step's, and no worker:
// the step before it let go of its own once its outcome was recorded. (It
// held it to the action's end, and RunTable::Busy counted every chained
// instance waiting for a reply as holding a worker, so under load a new
// instance's first step seldom rode in its creation commit.)
TEST_F(StepRunnerTest, AChainWaitingForAReplyHoldsOneMarkAndNoWorker) {
  std::atomic<int> ended{0};
  auto mark = ExecuteDeferred(&ended);
  ASSERT_EQ(downstream_->DeferredCount(), 1u);
  EXPECT_EQ(runs_.Busy(), 0u);  // waiting for a reply
  std::thread(downstream_->Deferred(0)).join();
  ASSERT_TRUE(testing::WaitFor([&] { return downstream_->DeferredCount() == 2; }));
  EXPECT_EQ(Now()->step(1).status(), StepStatus::kStarted);  // chained, sent, no reply yet
  EXPECT_FALSE(runs_.StepUnderWay("o1", 0));
  EXPECT_TRUE(runs_.StepUnderWay("o1", 1));
  EXPECT_EQ(runs_.Busy(), 0u);
  EXPECT_FALSE(*mark);  // the caller's copy: let go of
  EXPECT_EQ(ended, 0);
  downstream_->defer = false;
  std::thread(downstream_->Deferred(1)).join();
  ASSERT_TRUE(testing::WaitFor([&] { return ended == 1; }));
  EXPECT_EQ(Now()->status(), SagaStatus::kCompleted);
  EXPECT_TRUE(testing::WaitFor([&] { return !runs_.StepUnderWay("o1", 2); }));
}

// An action that ends while the engine stops records its outcome and sends
// nothing more: once stopping, no mark is given, so nothing chains; the
// stop returns when the action let go of its mark.
TEST_F(StepRunnerTest, NothingChainsOnceTheEngineStops) {
  std::atomic<int> ended{0};
  auto mark = ExecuteDeferred(&ended);
  ASSERT_EQ(downstream_->DeferredCount(), 1u);
  auto stopped = std::async(std::launch::async, [&] { return runs_.StopAndWait(); });
  ASSERT_TRUE(testing::WaitFor([&] { return runs_.Stopping(); }));
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  downstream_->defer = false;
  std::thread(downstream_->Deferred(0)).join();
  ASSERT_TRUE(testing::WaitFor([&] { return ended == 1; }));
  ASSERT_EQ(stopped.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(stopped.get());
  EXPECT_EQ(Now()->step(0).status(), StepStatus::kCommitted);  // its outcome is recorded
  EXPECT_EQ(Now()->step(1).status(), StepStatus::kPlanned);    // and nothing chained
  EXPECT_EQ(downstream_->Calls().size(), 1u);
}

TEST_F(StepRunnerTest, APausedServiceGetsNothingWrittenAndTheStepAsksAgainLater) {
  gates_->Pause("inventory", true);
  EXPECT_EQ(Execute(0), Next::kStop);
  EXPECT_TRUE(downstream_->calls.empty());
  EXPECT_EQ(commits_, 0);  // no STARTED record: nothing to reconcile
  EXPECT_EQ(Now()->step(0).status(), StepStatus::kPlanned);
  ASSERT_EQ(later_.size(), 1u);
  EXPECT_EQ(later_[0].first, "o1");
  EXPECT_EQ(gates_->WaitingFor("o1", "reserve_inventory"), "inventory");
  gates_->Pause("inventory", false);
  EXPECT_EQ(Execute(0), Next::kContinue);
  EXPECT_EQ(downstream_->calls.size(), 3u);
  EXPECT_EQ(gates_->WaitingFor("o1", "reserve_inventory"), "");
}

TEST_F(StepRunnerTest, NothingChainsToAPausedService) {
  gates_->Pause("payments", true);
  EXPECT_EQ(Execute(0), Next::kContinue);
  ASSERT_EQ(downstream_->calls.size(), 1u);  // reserve only; charge is left to the driver
  EXPECT_EQ(Now()->step(1).status(), StepStatus::kPlanned);
  EXPECT_FALSE(runs_.StepUnderWay("o1", 1));
}

TEST_F(StepRunnerTest, AnUnclearOutcomeIsUnknownNeverFailedAndNothingChains) {
  downstream_->answers = {Outcome::kUnknown};
  EXPECT_EQ(Execute(0), Next::kContinue);
  EXPECT_EQ(downstream_->calls.size(), 1u);
  EXPECT_EQ(Now()->step(0).status(), StepStatus::kUnknown);
  EXPECT_EQ(Now()->status(), SagaStatus::kRunning);
}

TEST_F(StepRunnerTest, ReconcileAsksBeforeAnyResend) {
  downstream_->answers = {Outcome::kUnknown};
  Execute(0);
  downstream_->query_answer = QueryOutcome::kHappened;
  EXPECT_EQ(Reconcile(Now(), 0), Next::kContinue);
  EXPECT_EQ(downstream_->queries, std::vector<std::string>{"o1:reserve_inventory"});
  EXPECT_EQ(downstream_->calls.size(), 1u);  // asked, not re-sent
  EXPECT_EQ(Now()->step(0).status(), StepStatus::kCommitted);
  EXPECT_EQ(Now()->step(0).external_ref, "R-found");
}

// An answer about an unclear call is recorded as a reply is: with an
// asynchronous commit (no thread waits for its fsync), whatever it says.
TEST_F(StepRunnerTest, AnAnswerAboutAnUnclearCallIsRecordedWithAnAsynchronousCommit) {
  downstream_->answers = {Outcome::kUnknown, Outcome::kUnknown};
  Execute(0);
  for (QueryOutcome answer : {QueryOutcome::kUnknown, QueryOutcome::kNotHappened}) {
    downstream_->query_answer = answer;
    int blocking = commits_ - async_commits_, async = async_commits_;
    EXPECT_EQ(Reconcile(Now(), 0), Next::kContinue);
    EXPECT_EQ(commits_ - async_commits_, blocking) << QueryOutcomeName(answer);
    EXPECT_EQ(async_commits_, async + 1) << QueryOutcomeName(answer);
  }
  EXPECT_EQ(Now()->step(0).status(), StepStatus::kPlanned);  // not executed: sent again later
  EXPECT_EQ(Now()->step(0).reconciliations, 1);
  EXPECT_EQ(downstream_->calls.size(), 1u);
}

// Regression: a stored refusal is FAILED (the saga turns back), never
// COMMITTED, and nothing is re-sent.
TEST_F(StepRunnerTest, AReconciliationThatSaysRefusedFailsTheStepWithoutAResend) {
  downstream_->answers = {Outcome::kCommitted, Outcome::kUnknown};
  Execute(0);
  ASSERT_EQ(Now()->step(1).status(), StepStatus::kUnknown);
  downstream_->query_answer = QueryOutcome::kRefused;
  EXPECT_EQ(Reconcile(Now(), 1), Next::kContinue);
  EXPECT_EQ(downstream_->calls.size(), 2u);  // asked, not re-sent
  auto inst = Now();
  EXPECT_EQ(inst->step(1).status(), StepStatus::kFailed);
  EXPECT_EQ(inst->step(1).external_ref, "");
  EXPECT_EQ(inst->status(), SagaStatus::kCompensating);
  EXPECT_EQ(NextAction(def_, *inst).kind, ActionKind::kCompensate);
  EXPECT_EQ(NextAction(def_, *inst).step, 0);
}

// Regression: an outcome the store keeps refusing is tried a bounded number
// of times, then the saga stops for a human; it never loops.
TEST_F(StepRunnerTest, AnOutcomeTheStoreKeepsRefusingSendsTheSagaToReview) {
  refusing_->refuse = true;
  EXPECT_EQ(Execute(0), Next::kStop);
  EXPECT_EQ(refusing_->refused.load(), StepRunner::kRecordTries);
  EXPECT_EQ(downstream_->calls.size(), 1u);
  auto inst = Now();
  EXPECT_EQ(inst->status(), SagaStatus::kNeedsReview);
  EXPECT_EQ(inst->step(0).status(), StepStatus::kStarted);  // what is recorded stays true
  EXPECT_NE(inst->review_reason().find("could not be recorded"), std::string::npos)
      << inst->review_reason();
}

TEST_F(StepRunnerTest, NeverHappenedGoesBackToPlannedWithABackoff) {
  downstream_->answers = {Outcome::kUnknown};
  Execute(0);
  downstream_->query_answer = QueryOutcome::kNotHappened;
  Reconcile(Now(), 0);
  const StepState& st = Now()->step(0);
  EXPECT_EQ(st.status(), StepStatus::kPlanned);
  // Full jitter: the wait is drawn from [0, initial_backoff_ms] (0 included).
  EXPECT_GT(st.retry_at, 0);
  EXPECT_GE(st.retry_at, clock_.NowMillis());
  EXPECT_LE(st.retry_at, clock_.NowMillis() + RetryPolicy{}.initial_backoff_ms);
  EXPECT_EQ(downstream_->calls.size(), 1u);
  // The re-send, when it comes, uses the same key.
  clock_.Advance(st.retry_at - clock_.NowMillis());
  Execute(0);
  ASSERT_GE(downstream_->calls.size(), 2u);
  EXPECT_EQ(downstream_->calls[1].idempotency_key, "o1:reserve_inventory");
  EXPECT_EQ(downstream_->calls[1].attempt, 2);
}

TEST_F(StepRunnerTest, ADefiniteFailureTurnsTheSagaBackAndUndoesWhatCommitted) {
  downstream_->answers = {Outcome::kCommitted, Outcome::kFailed};
  Execute(0);
  auto inst = Now();
  EXPECT_EQ(inst->step(1).status(), StepStatus::kFailed);
  EXPECT_EQ(inst->status(), SagaStatus::kCompensating);
  EXPECT_EQ(Compensate(inst, 0), Next::kContinue);
  ASSERT_EQ(downstream_->calls.size(), 3u);
  EXPECT_EQ(downstream_->calls[2].path, "/reservations/R-reserve_inventory/release");
  EXPECT_EQ(downstream_->calls[2].idempotency_key, "o1:reserve_inventory:compensate");
  EXPECT_TRUE(downstream_->durable_before_send[2]);
  EXPECT_EQ(Now()->step(0).status(), StepStatus::kCompensated);
}

TEST_F(StepRunnerTest, AFencedOutRunnerSendsNothingMore) {
  clock_.Advance(4000);  // this process paused past its lease
  ASSERT_TRUE(store_->AcquireLease("o1", "west/1", clock_, 3000, "").ok());
  EXPECT_EQ(Execute(0), Next::kStop);
  EXPECT_TRUE(downstream_->calls.empty());
  EXPECT_EQ(Now()->step(0).status(), StepStatus::kPlanned);
}

// Regression: the holder's clock jumps past its lease between the STARTED
// commit and the send (a pause), and another coordinator took the lease
// meanwhile: nothing leaves; the STARTED record is the new owner's to
// reconcile.
TEST_F(StepRunnerTest, AHolderWhoseLeaseRanOutBeforeTheSendSendsNothing) {
  after_commit_ = [this] {
    clock_.Advance(4000);
    ASSERT_TRUE(store_->AcquireLease("o1", "west/1", clock_, 3000, "").ok());
  };
  EXPECT_EQ(Execute(0), Next::kStop);
  EXPECT_TRUE(downstream_->calls.empty());
  EXPECT_EQ(Now()->step(0).status(), StepStatus::kStarted);
  EXPECT_FALSE(ownership_->Held("o1"));
}

TEST_F(StepRunnerTest, ALeaseShorterThanAThirdIsRenewedBeforeTheSendThenItGoes) {
  after_commit_ = [this] { clock_.Advance(2500); };  // nobody else took it
  EXPECT_EQ(Execute(0), Next::kContinue);
  ASSERT_EQ(downstream_->calls.size(), 3u);
  EXPECT_EQ(Now()->status(), SagaStatus::kCompleted);
}

}  // namespace
}  // namespace sagad
