// Submissions over a real LMDB store: a second Submissions on the same file
// is another coordinator process.
#include "coordinator/engine/actions/submissions.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>

#include "coordinator/engine/instances/definition_registry.h"
#include "coordinator/engine/instances/instance_repository.h"
#include "coordinator/engine/instances/ownership.h"
#include "coordinator/engine/instances/run_table.h"
#include "coordinator/engine/instances/transition.h"
#include "coordinator/engine/steps/step_request.h"
#include "examples/examples.h"
#include "tests/testing/forwarding_store.h"
#include "tests/testing/store_fixture.h"

namespace sagad {
namespace {

// A submission and the wait for its outcome (the engine itself never waits).
StatusOr<SubmitOutcome> SubmitNow(Submissions& subs, const std::string& saga, int version,
                                  const nlohmann::json& input, const std::string& key,
                                  const std::string& hash, const TraceContext& trace) {
  std::promise<StatusOr<SubmitOutcome>> p;
  auto f = p.get_future();
  subs.SubmitAsync(saga, version, input, key, hash, trace, nullptr, "local",
                   [&p](StatusOr<SubmitOutcome> out) { p.set_value(std::move(out)); });
  return f.get();
}

class SubmissionsTest : public testing::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    ASSERT_TRUE(defs_.Register(OrderFulfilment()).ok());
    repo_ = std::make_unique<InstanceRepository>(*store_, clock_);
    ownership_ = std::make_unique<Ownership>(*store_, clock_, "east", 3000);
    subs_ = std::make_unique<Submissions>(defs_, *repo_, *ownership_, clock_, starter_);
  }
  // Plans each created instance (no first step rides in the creation).
  class Starter final : public Submissions::Starter {
   public:
    explicit Starter(std::vector<std::string>* scheduled) : scheduled_(scheduled) {}
    void StartCreated(const std::string& id, const SagaDefinitionPtr&, StepMark, StepRequest*,
                      const TraceContext&, bool created) override {
      if (created) scheduled_->push_back(id);
    }

   private:
    std::vector<std::string>* scheduled_;
  };
  nlohmann::json Input() {
    return {{"sku", "A-1"},      {"qty", 1},       {"amount", 10},
            {"currency", "EUR"}, {"address", "x"}, {"customer", "c"}};
  }
  StatusOr<SubmitOutcome> Submit(const std::string& key, const std::string& hash,
                                 nlohmann::json input = nullptr) {
    return SubmitNow(*subs_, "order_fulfilment", 0, input.is_null() ? Input() : input, key, hash,
                     TraceContext{});
  }

  DefinitionRegistry defs_;
  std::unique_ptr<InstanceRepository> repo_;
  std::unique_ptr<Ownership> ownership_;
  std::vector<std::string> scheduled_;
  Starter starter_{&scheduled_};
  std::unique_ptr<Submissions> subs_;
};

TEST_F(SubmissionsTest, CreatesOwnsAndSchedulesTheInstance) {
  auto out = Submit("", "");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FALSE(out->replayed);
  EXPECT_EQ(scheduled_, std::vector<std::string>{out->instance_id});
  auto inst = repo_->Load(out->instance_id);
  ASSERT_TRUE(inst.ok());
  EXPECT_EQ((*inst)->status(), SagaStatus::kRunning);
  auto lease = store_->GetLease(out->instance_id);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->owner, ownership_->owner());
  EXPECT_EQ(ownership_->Token(out->instance_id), 1u);
}

TEST_F(SubmissionsTest, RefusesUnknownSagasAndIncompleteInput) {
  EXPECT_EQ(SubmitNow(*subs_, "nope", 0, Input(), "", "", {}).status().code(),
            StatusCode::kNotFound);
  Status s = SubmitNow(*subs_, "order_fulfilment", 7, Input(), "", "", {}).status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("no registered version 7"), std::string::npos) << s.ToString();
  nlohmann::json missing = Input();
  missing.erase("sku");
  s = Submit("", "", missing).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sku"), std::string::npos) << s.ToString();
  EXPECT_EQ(Submit("", "", nlohmann::json::array({1})).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(scheduled_.empty());
}

TEST_F(SubmissionsTest, AKeyReplaysTheSameRequestAndRefusesAnother) {
  auto first = Submit("key-1", "h1");
  ASSERT_TRUE(first.ok());
  // Still being answered: a concurrent duplicate is told to wait.
  EXPECT_EQ(Submit("key-1", "h1").status().code(), StatusCode::kFailedPrecondition);
  subs_->Finish("key-1", 201, {{"id", first->instance_id}});
  subs_->WaitIdle();  // the response is stored asynchronously
  auto again = Submit("key-1", "h1");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->instance_id, first->instance_id);
  EXPECT_EQ(again->stored_status, 201);
  EXPECT_EQ(Submit("key-1", "other").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(scheduled_.size(), 1u);  // one instance, one driver
}

TEST_F(SubmissionsTest, AnotherProcessWithTheSameKeyReplaysTheFirstInstance) {
  Ownership west_owner(*store_, clock_, "west", 3000);
  InstanceRepository west_repo(*store_, clock_);
  std::vector<std::string> west_scheduled;
  Starter west_starter(&west_scheduled);
  Submissions west(defs_, west_repo, west_owner, clock_, west_starter);
  auto first = Submit("key-2", "h");
  ASSERT_TRUE(first.ok());
  auto second = SubmitNow(west, "order_fulfilment", 0, Input(), "key-2", "h", {});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->replayed);
  EXPECT_EQ(second->instance_id, first->instance_id);
  EXPECT_TRUE(west_scheduled.empty());
}

TEST_F(SubmissionsTest, AFirstStepRidesInTheCreationCommitWithItsOperationRecord) {
  // Its first step rides in the creation; records what it is told to start.
  struct Chaining final : Submissions::Starter {
    std::vector<std::pair<int, bool>> started;
    RunTable runs;
    Status FirstStep(Tx& tx, const SagaDefinition&, StepMark* step, StepRequest* request) override {
      *step = runs.TryMarkStep(tx.inst().id(), 0, 1);
      request->path = "/reservations";
      return tx.Step(0, StepEvent::kStart, {{"key", tx.inst().id() + ":reserve_inventory"}});
    }
    void StartCreated(const std::string& id, const SagaDefinitionPtr&, StepMark step,
                      StepRequest* request, const TraceContext&, bool created) override {
      EXPECT_EQ(request->path, "/reservations");
      EXPECT_TRUE(runs.StepUnderWay(id, 0));  // the mark comes with it
      started.push_back({step.step(), created});
    }
  } chaining;
  Submissions subs(defs_, *repo_, *ownership_, clock_, chaining);
  auto out = SubmitNow(subs, "order_fulfilment", 0, Input(), "", "", {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(chaining.started, (std::vector<std::pair<int, bool>>{{0, true}}));
  auto events = store_->GetEvents(out->instance_id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);  // one commit: created + started
  EXPECT_EQ((*events)[1].type, "started");
  EXPECT_EQ(store_->GetInstance(out->instance_id)->value("version", 0), 1);
  auto op = store_->GetOperation(out->instance_id + ":reserve_inventory");
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->state, "STARTED");
}

// A store read for one key (a database's round trip, up to its deadline)
// holds up no submission with another key: the key's lookup is made outside
// the table of keys in flight. A second request with the held key, once the
// first went on to create, is told it is in progress.
TEST_F(SubmissionsTest, ALookupOfOneKeyHoldsUpNoOtherSubmission) {
  class HeldStore final : public testing::ForwardingStore {
   public:
    using ForwardingStore::ForwardingStore;
    StatusOr<Submission> GetSubmission(const std::string& key) override {
      if (key == "held") {
        std::unique_lock<std::mutex> l(mu);
        inside = true;
        cv.notify_all();
        cv.wait(l, [&] { return released; });
      }
      return ForwardingStore::GetSubmission(key);
    }
    std::mutex mu;
    std::condition_variable cv;
    bool inside = false, released = false;
  } held(*store_);
  InstanceRepository repo(held, clock_);
  Submissions subs(defs_, repo, *ownership_, clock_, starter_);
  auto first = std::async(std::launch::async, [&] {
    return SubmitNow(subs, "order_fulfilment", 0, Input(), "held", "h1", TraceContext{});
  });
  {
    std::unique_lock<std::mutex> l(held.mu);
    ASSERT_TRUE(held.cv.wait_for(l, std::chrono::seconds(10), [&] { return held.inside; }));
  }
  auto other = std::async(std::launch::async, [&] {
    return SubmitNow(subs, "order_fulfilment", 0, Input(), "other", "h2", TraceContext{});
  });
  const bool done = other.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  {
    std::lock_guard<std::mutex> l(held.mu);
    held.released = true;
    held.cv.notify_all();
  }
  ASSERT_TRUE(done) << "a submission with another key waited for the held lookup";
  ASSERT_TRUE(other.get().ok());
  auto out = first.get();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FALSE(out->replayed);
  // Not answered yet: the same key again is told it is in progress; once
  // answered, it replays.
  EXPECT_EQ(
      SubmitNow(subs, "order_fulfilment", 0, Input(), "held", "h1", TraceContext{}).status().code(),
      StatusCode::kFailedPrecondition);
  subs.Finish("held", 201, {{"id", out->instance_id}});
  subs.WaitIdle();
  auto again = SubmitNow(subs, "order_fulfilment", 0, Input(), "held", "h1", TraceContext{});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->instance_id, out->instance_id);
  subs.Finish("other", 201, {});
  subs.WaitIdle();
}

}  // namespace
}  // namespace sagad
