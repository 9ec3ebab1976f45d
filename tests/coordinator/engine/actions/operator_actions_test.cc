// OperatorActions over a real LMDB store and InstanceRepository, with the
// incident_response saga (its last step waits for approval).
#include "coordinator/engine/actions/operator_actions.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include "coordinator/engine/owners/asio_executor.h"
#include "coordinator/engine/steps/step_request.h"
#include "examples/examples.h"
#include "tests/testing/store_fixture.h"

namespace sagad {
namespace {

class OperatorActionsTest : public testing::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    repo_ = std::make_unique<InstanceRepository>(*store_, clock_);
    ASSERT_TRUE(defs_.Register(IncidentResponse()).ok());
    ops_ = std::make_unique<OperatorActions>(
        defs_, *repo_, runs_, [this](const std::string& id) { woken_.push_back(id); });
    Instance inst;
    Event created = Instance::CreatedEvent(
        "i1", *defs_.Get("incident_response", 0),
        {{"title", "t"}, {"severity", "high"}, {"host", "h"}, {"user", "u"}, {"email", "a@x"}});
    created.seq = 1;
    ASSERT_TRUE(inst.Apply(created).ok());
    inst.set_version(1);
    ASSERT_TRUE(repo_->Create(inst, {created}, {}, nullptr, nullptr).ok());
  }
  void Do(const std::function<Status(Tx&)>& fn) {
    Status s = repo_->Mutate("i1", fn, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void CommitStep(int i) {
    Do([i](Tx& tx) -> Status {
      SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kStart, {{"key", "k" + std::to_string(i)}}));
      return tx.Step(i, StepEvent::kCommit,
                     {{"result", {{"id", i}}}, {"external_ref", std::to_string(i)}});
    });
  }
  void AwaitApproval() {
    for (int i = 0; i < 3; ++i) CommitStep(i);
    Do([](Tx& tx) -> Status {
      SAGAD_RETURN_IF_ERROR(tx.Step(3, StepEvent::kRequestApproval));
      return tx.Saga(SagaEvent::kWaitForApproval);
    });
  }
  std::shared_ptr<const Instance> Now() { return *repo_->Load("i1"); }

  DefinitionRegistry defs_;
  RunTable runs_;
  std::unique_ptr<InstanceRepository> repo_;
  std::unique_ptr<OperatorActions> ops_;
  std::vector<std::string> woken_;
};

TEST_F(OperatorActionsTest, ApprovalBindsToTheExactRequestAndWakesTheDriver) {
  AwaitApproval();
  ASSERT_TRUE(ops_->Approve("i1", "notify_user", "ann", "ok").ok());
  auto inst = Now();
  EXPECT_EQ(inst->status(), SagaStatus::kRunning);
  const StepState& st = inst->step(3);
  EXPECT_TRUE(st.machine.approved());
  auto expected = RenderStepRequest(*inst, defs_.Get("incident_response", 0)->steps[3].forward);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(st.approval.value("args_hash", ""), expected->hash) << st.approval.dump();
  EXPECT_EQ(woken_, std::vector<std::string>{"i1"});
  // A repeated approval (a client's retry) is accepted and changes nothing.
  uint64_t version = inst->version();
  EXPECT_TRUE(ops_->Approve("i1", "notify_user", "ann", "ok").ok());
  EXPECT_EQ(Now()->version(), version);
}

TEST_F(OperatorActionsTest, WhatDoesNotFitTheStateIsRefusedAndLeavesNoTrace) {
  EXPECT_EQ(ops_->Approve("i1", "nope", "ann", "").code(), StatusCode::kNotFound);
  Status s = ops_->Approve("i1", "create_ticket", "ann", "");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("not awaiting approval (it is PLANNED)"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(ops_->Resolve("i1", "create_ticket", "committed", "", "ann", "").code(),
            StatusCode::kFailedPrecondition);  // not in review
  EXPECT_EQ(ops_->Resolve("i1", "create_ticket", "maybe", "", "ann", "").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Now()->version(), 1u);
  EXPECT_TRUE(woken_.empty());
}

TEST_F(OperatorActionsTest, RejectTurnsTheSagaBackOnce) {
  AwaitApproval();
  ASSERT_TRUE(ops_->Reject("i1", "notify_user", "ann", "no").ok());
  EXPECT_EQ(Now()->status(), SagaStatus::kCompensating);
  uint64_t version = Now()->version();
  EXPECT_TRUE(ops_->Reject("i1", "notify_user", "ann", "no").ok());
  EXPECT_EQ(Now()->version(), version);
  EXPECT_TRUE(ops_->Cancel("i1", "ann", "too").ok());  // already turning back
  EXPECT_EQ(Now()->version(), version);
}

// Two branches wait for approval; an operator rejects one. The saga turns
// back, and the other approval is withdrawn with it (REJECTED, "not
// needed"): nothing lists it as waiting any more, and no approval of it
// could send a request for a saga going back.
TEST_F(OperatorActionsTest, RejectingOneBranchWithdrawsTheApprovalTheOtherWaitsFor) {
  SagaBuilder b("twin", 1);
  b.Step("left").Call("svc", "POST", "/l").Compensate("svc", "POST", "/l/undo").RequiresApproval();
  b.Step("right")
      .Call("svc", "POST", "/r")
      .Compensate("svc", "POST", "/r/undo")
      .RequiresApproval()
      .AfterSteps({});
  auto def = b.Build();
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  ASSERT_TRUE(defs_.Register(*def).ok());
  Instance inst;
  Event created = Instance::CreatedEvent("t1", *def, nlohmann::json::object());
  created.seq = 1;
  ASSERT_TRUE(inst.Apply(created).ok());
  inst.set_version(1);
  ASSERT_TRUE(repo_->Create(inst, {created}, {}, nullptr, nullptr).ok());
  ASSERT_TRUE(repo_
                  ->Mutate(
                      "t1",
                      [](Tx& tx) -> Status {
                        SAGAD_RETURN_IF_ERROR(tx.Step(0, StepEvent::kRequestApproval));
                        SAGAD_RETURN_IF_ERROR(tx.Step(1, StepEvent::kRequestApproval));
                        return tx.Saga(SagaEvent::kWaitForApproval);
                      },
                      nullptr)
                  .ok());
  ASSERT_TRUE(ops_->Reject("t1", "left", "ann", "no").ok());
  auto now = *repo_->Load("t1");
  EXPECT_EQ(now->status(), SagaStatus::kCompensating);
  EXPECT_EQ(now->step(0).status(), StepStatus::kRejected);
  EXPECT_EQ(now->step(1).status(), StepStatus::kRejected) << "the other approval still waits";
}

// Found by the simulator (seed 294841): another process rejected the step;
// here, the owner, a refused action then loaded that newer version into the
// cache, and the heartbeat (which compares the cache with the store) never
// saw the change: the saga stayed COMPENSATING with nothing left to undo.
TEST_F(OperatorActionsTest, ARefusedActionThatLoadsANewerVersionWakesTheOwner) {
  AwaitApproval();
  InstanceRepository elsewhere(*store_, clock_);
  OperatorActions there(defs_, elsewhere, runs_, [](const std::string&) {});
  ASSERT_TRUE(there.Reject("i1", "notify_user", "bob", "no").ok());
  repo_->Evict("i1");  // as after a failed commit here
  woken_.clear();
  EXPECT_EQ(ops_->Approve("i1", "notify_user", "ann", "").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(woken_, std::vector<std::string>{"i1"});
  // Refused again, nothing new loaded: no wake.
  woken_.clear();
  EXPECT_EQ(ops_->Approve("i1", "notify_user", "ann", "").code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(woken_.empty());
}

TEST_F(OperatorActionsTest, AFinishedInstanceIsNeverWoken) {
  Do([](Tx& tx) -> Status {
    SAGAD_RETURN_IF_ERROR(tx.Saga(SagaEvent::kStartCompensation, {{"reason", "test"}}));
    return tx.Saga(SagaEvent::kFinishCompensation);
  });
  repo_->Evict("i1");
  EXPECT_TRUE(ops_->Cancel("i1", "ann", "late").ok());  // already turned back
  EXPECT_EQ(ops_->Approve("i1", "notify_user", "ann", "").code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(woken_.empty());
}

TEST_F(OperatorActionsTest, ResolveIsRefusedWhileTheRequestIsInFlightHere) {
  Do([](Tx& tx) -> Status {
    SAGAD_RETURN_IF_ERROR(tx.Step(0, StepEvent::kStart, {{"key", "k0"}}));
    SAGAD_RETURN_IF_ERROR(tx.Step(0, StepEvent::kEscalate, {{"error", "timeout"}}));
    return tx.Saga(SagaEvent::kEscalate, {{"reason", "timeout"}});
  });
  StepMark mark = runs_.TryMarkStep("i1", 0, 8);
  ASSERT_TRUE(mark);
  Status s = ops_->Resolve("i1", "create_ticket", "committed", "T-1", "ann", "seen it");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("in flight"), std::string::npos) << s.ToString();
  mark.Release();
  ASSERT_TRUE(ops_->Resolve("i1", "create_ticket", "committed", "T-1", "ann", "seen it").ok());
  EXPECT_EQ(Now()->step(0).status(), StepStatus::kCommitted);
  EXPECT_EQ(Now()->step(0).external_ref, "T-1");
  EXPECT_EQ(Now()->status(), SagaStatus::kRunning);
}

// An asynchronous action (what the API runs) begins on the instance's owner,
// after the task the owner runs now. A client answered from a commit's
// continuation (its ?wait settled in review) that resolves at once must not
// find the mark of the step action that commit ended, which the same task
// releases after the answer left: it did (a 409 "request in flight" for a
// request long over; ReviewTest.UnanswerableUnknown... on PostgreSQL).
TEST_F(OperatorActionsTest, AnAsyncActionBeginsAfterTheTaskItsOwnerRunsNow) {
  Do([](Tx& tx) -> Status {
    SAGAD_RETURN_IF_ERROR(tx.Step(0, StepEvent::kStart, {{"key", "k0"}}));
    SAGAD_RETURN_IF_ERROR(tx.Step(0, StepEvent::kEscalate, {{"error", "timeout"}}));
    return tx.Saga(SagaEvent::kEscalate, {{"reason", "timeout"}});
  });
  AsioExecutor owners(2);
  InstanceRepository repo(*store_, clock_, nullptr, &owners);  // as the engine's
  OperatorActions ops(defs_, repo, runs_, [](const std::string&) {});
  std::promise<Status> answered;
  owners.PostTo("i1", [&] {
    // The owner's task: the step action whose commit settled the saga ends
    // here; the client, answered, resolves before the task is over.
    StepMark mark = runs_.TryMarkStep("i1", 0, 8);
    ASSERT_TRUE(mark);
    Status s = ops.Resolve("i1", "create_ticket", "committed", "T-1", "ann", "seen it",
                           [&](Status done) { answered.set_value(done); });
    EXPECT_TRUE(s.ok()) << s.ToString();
    mark.Release();
  });
  auto got = answered.get_future();
  ASSERT_EQ(got.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  Status s = got.get();
  EXPECT_TRUE(s.ok()) << s.ToString();
  repo.WaitIdle();
  EXPECT_EQ((*repo.Load("i1"))->step(0).status(), StepStatus::kCommitted);
}

TEST_F(OperatorActionsTest, CancelRunningSagaTurnsItBackAndWithdrawsApprovals) {
  AwaitApproval();
  ASSERT_TRUE(ops_->Cancel("i1", "ann", "wrong host").ok());
  auto inst = Now();
  EXPECT_EQ(inst->status(), SagaStatus::kCompensating);
  EXPECT_EQ(inst->step(3).status(), StepStatus::kRejected);
}

// Regression: once the irreversible step is in flight (or its outcome is
// unknown, or it committed), nothing turns the saga back: cancel and a
// forced compensation are refused naming the step.
TEST_F(OperatorActionsTest, CancelAndForcedCompensationAreRefusedOnceThePivotIsInFlight) {
  AwaitApproval();
  ASSERT_TRUE(ops_->Approve("i1", "notify_user", "ann", "ok").ok());
  Do([](Tx& tx) { return tx.Step(3, StepEvent::kStart, {{"key", "k3"}}); });
  for (int round = 0; round < 2; ++round) {  // STARTED, then UNKNOWN
    const uint64_t version = Now()->version();
    Status s = ops_->Cancel("i1", "ann", "too late");
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("irreversible step 'notify_user' is "), std::string::npos)
        << s.ToString();
    EXPECT_EQ(Now()->version(), version);
    EXPECT_EQ(Now()->status(), SagaStatus::kRunning);
    if (round == 0)
      Do([](Tx& tx) { return tx.Step(3, StepEvent::kOutcomeUnknown, {{"error", "timeout"}}); });
  }
  Do([](Tx& tx) -> Status {
    SAGAD_RETURN_IF_ERROR(tx.Step(3, StepEvent::kEscalate, {{"error", "timeout"}}));
    return tx.Saga(SagaEvent::kEscalate, {{"reason", "timeout"}});
  });
  Status s = ops_->ForceCompensate("i1", "ann", "undo it all");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("irreversible step 'notify_user'"), std::string::npos) << s.ToString();
  EXPECT_EQ(Now()->status(), SagaStatus::kNeedsReview);
}

TEST_F(OperatorActionsTest, CancelIsAcceptedWhileThePivotOnlyWaitsForApproval) {
  AwaitApproval();
  ASSERT_TRUE(ops_->Approve("i1", "notify_user", "ann", "ok").ok());  // not sent yet
  ASSERT_TRUE(ops_->Cancel("i1", "ann", "changed my mind").ok());
  EXPECT_EQ(Now()->status(), SagaStatus::kCompensating);
}

}  // namespace
}  // namespace sagad
