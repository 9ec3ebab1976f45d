// The rules that decide what an operator may do (policies/operator_rules.h):
// the same answers OperatorActions gives, listed for the console.
#include "policies/operator_rules.h"

#include <gtest/gtest.h>

#include "examples/examples.h"
#include "tests/testing/instance_events.h"

namespace sagad {
namespace {

class OperatorRulesTest : public ::testing::Test, protected testing::InstanceEvents {
 protected:
  void SetUp() override {
    def_ = IncidentResponse();  // create_ticket, isolate_host, disable_account, notify_user
    Create(def_, {{"title", "t"}});
  }
  void CommitFirstThree() {
    for (const char* s : {"create_ticket", "isolate_host", "disable_account"}) {
      Step(s, StepEvent::kStart);
      Step(s, StepEvent::kCommit);
    }
  }
  nlohmann::json Allowed() {
    return AllowedActions(&def_, inst_, [](int) { return false; });
  }

  SagaDefinition def_;
};

TEST_F(OperatorRulesTest, ARunningSagaMayBeCancelledAndItsNextStepSkipped) {
  EXPECT_TRUE(MayCancel(def_, inst_).ok());
  EXPECT_TRUE(MaySkip(inst_, 0).ok());
  Status c = MayForceCompensate(def_, inst_);
  EXPECT_EQ(c.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(c.message().find("not in NEEDS_REVIEW"), std::string::npos) << c.message();
  EXPECT_FALSE(MayRetry(inst_, 0).ok());
  EXPECT_FALSE(MayResolve(inst_, 0, false).ok());
  EXPECT_FALSE(MayApprove(inst_, 0).ok());
}

TEST_F(OperatorRulesTest, OnlyTheStepAwaitingApprovalMayBeApprovedOrRejected) {
  CommitFirstThree();
  Step("notify_user", StepEvent::kRequestApproval);
  Saga(SagaEvent::kWaitForApproval);
  nlohmann::json a = Allowed();
  EXPECT_EQ(a["steps"]["notify_user"]["approve"]["allowed"], true) << a.dump();
  EXPECT_EQ(a["steps"]["notify_user"]["reject"]["allowed"], true);
  EXPECT_EQ(a["steps"]["create_ticket"]["approve"]["allowed"], false);
  EXPECT_EQ(a["cancel"]["allowed"], true);  // not sent: nothing irreversible happened
}

TEST_F(OperatorRulesTest, NothingTurnsTheSagaBackOnceThePivotWasSent) {
  CommitFirstThree();
  Step("notify_user", StepEvent::kRequestApproval);
  Step("notify_user", StepEvent::kApprove);
  Step("notify_user", StepEvent::kStart);
  Status c = MayCancel(def_, inst_);
  EXPECT_EQ(c.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(c.message().find("irreversible step 'notify_user'"), std::string::npos) << c.message();
  nlohmann::json a = Allowed();
  EXPECT_EQ(a["cancel"]["allowed"], false);
  EXPECT_EQ(a["cancel"]["reason"], c.message());
}

TEST_F(OperatorRulesTest, InReviewAnUnknownStepIsResolvedBeforeAnythingElse) {
  Step("create_ticket", StepEvent::kStart);
  Step("create_ticket", StepEvent::kOutcomeUnknown);
  Step("create_ticket", StepEvent::kEscalate);
  Saga(SagaEvent::kEscalate);
  EXPECT_TRUE(MayResolve(inst_, 0, false).ok());
  EXPECT_FALSE(MayResolve(inst_, 0, /*in_flight=*/true).ok());
  EXPECT_FALSE(MayResolve(inst_, 1, false).ok());  // planned: nothing unknown
  Status c = MayForceCompensate(def_, inst_);
  EXPECT_NE(c.message().find("resolve it before compensating"), std::string::npos) << c.message();
  EXPECT_NE(MayRetry(inst_, 0).message().find("resolve it instead"), std::string::npos);
  EXPECT_NE(MayCancel(def_, inst_).message().find("needs review"), std::string::npos);
  EXPECT_TRUE(MaySkip(inst_, 0).ok());  // an operator may supply the result
}

TEST_F(OperatorRulesTest, AnUnregisteredVersionAllowsNothingThatNeedsItsDefinition) {
  CommitFirstThree();
  Step("notify_user", StepEvent::kRequestApproval);
  Saga(SagaEvent::kWaitForApproval);
  nlohmann::json a = AllowedActions(nullptr, inst_, [](int) { return false; });
  EXPECT_EQ(a["cancel"]["allowed"], false);
  EXPECT_EQ(a["compensate"]["allowed"], false);
  EXPECT_EQ(a["steps"]["notify_user"]["approve"]["allowed"], false);
  EXPECT_NE(
      a["steps"]["notify_user"]["approve"]["reason"].get<std::string>().find("is not registered"),
      std::string::npos);
  EXPECT_EQ(a["steps"]["notify_user"]["reject"]["allowed"], true);
}

}  // namespace
}  // namespace sagad
