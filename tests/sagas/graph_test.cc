// Sagas as graphs: what registration refuses, and what the planner does with
// parallel branches (fan-out, drain before undo, both compensation orders).
#include "sagas/graph.h"

#include <gtest/gtest.h>

#include <random>

#include "examples/examples.h"
#include "policies/planner.h"
#include "sagas/ancestors.h"
#include "tests/testing/instance_events.h"

namespace sagad {
namespace {

// A step with a forward call and an undo on service "svc".
StepBuilder& Undoable(SagaBuilder& b, const std::string& name) {
  return b.Step(name)
      .Call("svc", "POST", "/" + name)
      .Compensate("svc", "POST", "/" + name + "/undo");
}

std::string Refusal(StatusOr<SagaDefinition> d) {
  EXPECT_FALSE(d.ok());
  return d.ok() ? "" : d.status().message();
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(GraphDefinitionTest, AStepWithoutAfterFollowsTheOneDeclaredBefore) {
  SagaDefinition of = OrderFulfilment();
  auto g = StepGraph::Of(of);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(of.IsChain());
  EXPECT_TRUE(g->IsAncestor(0, 2));
  EXPECT_EQ(of.DependencyNames(1), std::vector<std::string>{"reserve_inventory"});
  EXPECT_TRUE(of.DependencyNames(0).empty());
}

TEST(GraphDefinitionTest, TripBookingFansOutAndJoins) {
  SagaDefinition trip = TripBooking();
  auto g = StepGraph::Of(trip);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(trip.IsChain());
  EXPECT_FALSE(g->IsAncestor(0, 1));
  EXPECT_FALSE(g->IsAncestor(1, 0));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(g->IsAncestor(i, 3));
  EXPECT_TRUE(g->IsCutPoint(4));  // issue_tickets: nothing beside the pivot
  EXPECT_FALSE(g->IsCutPoint(0));
}

TEST(GraphDefinitionTest, RefusesUnknownDuplicateAndSelfDependencies) {
  {
    SagaBuilder b("s", 1);
    Undoable(b, "a");
    Undoable(b, "b").After("nope");
    EXPECT_TRUE(Has(Refusal(b.Build()), "step 'b' comes after unknown step 'nope'"));
  }
  {
    SagaBuilder b("s", 1);
    Undoable(b, "a");
    Undoable(b, "b").After("a", "a");
    EXPECT_TRUE(Has(Refusal(b.Build()), "step 'b' lists 'a' twice"));
  }
  {
    SagaBuilder b("s", 1);
    Undoable(b, "a").After("a");
    EXPECT_TRUE(Has(Refusal(b.Build()), "step 'a' comes after itself"));
  }
}

TEST(GraphDefinitionTest, RefusesACycleNamingItsSteps) {
  SagaBuilder b("s", 1);
  Undoable(b, "a").After("c");
  Undoable(b, "b").After("a");
  Undoable(b, "c").After("b");
  Undoable(b, "d").After();
  std::string why = Refusal(b.Build());
  EXPECT_TRUE(Has(why, "cycle")) << why;
  EXPECT_TRUE(Has(why, "a -> b -> c -> a") || Has(why, "a -> c -> b -> a") ||
              Has(why, "c -> b -> a -> c") || Has(why, "b -> a -> c -> b"))
      << why;
  EXPECT_FALSE(Has(why, "d ->")) << why;
}

TEST(GraphDefinitionTest, TemplatesMayOnlyUseAncestors) {
  SagaBuilder b("s", 1);
  Undoable(b, "a").After();
  b.Step("b").After().Call("svc", "POST", "/b/{{a.ref}}").Compensate("svc", "POST", "/u");
  std::string why = Refusal(b.Build());
  EXPECT_TRUE(Has(why, "step 'b' forward refers to step 'a'")) << why;
  // Declared later but an ancestor: fine.
  SagaBuilder ok("s", 1);
  ok.Step("b").After("a").Call("svc", "POST", "/b/{{a.ref}}").Compensate("svc", "POST", "/u");
  Undoable(ok, "a").After();
  EXPECT_TRUE(ok.Build().ok());
}

TEST(GraphDefinitionTest, ThePivotMustBeACutPoint) {
  SagaBuilder b("s", 1);
  Undoable(b, "a").After();
  b.Step("p").After().Call("svc", "POST", "/p").Irreversible();
  std::string why = Refusal(b.Build());
  EXPECT_TRUE(Has(why, "may run beside the irreversible step 'p'")) << why;

  SagaBuilder after("s", 1);
  Undoable(after, "a").After();
  after.Step("p").After("a").Call("svc", "POST", "/p").Irreversible();
  Undoable(after, "x").After("p");
  Undoable(after, "y").After("p");  // descendants may run beside each other
  EXPECT_TRUE(after.Build().ok());

  SagaBuilder unsafe("s", 1);
  unsafe.Step("p").Call("svc", "POST", "/p").Irreversible();
  Undoable(unsafe, "x").After("p");
  Undoable(unsafe, "y").After("p").Idempotent(false).Queryable(false);
  EXPECT_TRUE(Has(Refusal(unsafe.Build()), "step 'y' comes after the pivot 'p'"));
}

TEST(GraphDefinitionTest, MaxParallelIsBounded) {
  SagaBuilder b("s", 1);
  b.MaxParallel(0);
  Undoable(b, "a");
  EXPECT_TRUE(Has(Refusal(b.Build()), "max_parallel must be 1..64"));
}

TEST(GraphDefinitionTest, JsonRoundTripKeepsTheGraphAndOptions) {
  SagaBuilder b("s", 1);
  b.MaxParallel(3).CompensationOrder(CompensationOrder::kReverseCompletion);
  Undoable(b, "a").After();
  Undoable(b, "b").After();
  Undoable(b, "c").After("a", "b");
  auto def = b.Build();
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  nlohmann::json j = def->ToJson();
  EXPECT_EQ(j["max_parallel"], 3);
  EXPECT_EQ(j["compensation_order"], "reverse_completion");
  EXPECT_EQ(j["steps"][2]["after"], nlohmann::json({"a", "b"}));
  auto back = SagaDefinition::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *def);
}

TEST(GraphDefinitionTest, JsonRefusesUnknownKeysByName) {
  nlohmann::json j = OrderFulfilment().ToJson();
  j["steps"][1]["requires_aproval"] = true;  // the misspelling the issue names
  auto d = SagaDefinition::FromJson(j);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(Has(d.status().message(), "unknown key 'requires_aproval' in step 'charge_payment'"))
      << d.status().message();

  j = OrderFulfilment().ToJson();
  j["max_paralel"] = 2;
  EXPECT_TRUE(Has(Refusal(SagaDefinition::FromJson(j)), "unknown key 'max_paralel'"));
  j = OrderFulfilment().ToJson();
  j["steps"][0]["forward"]["headers"] = nlohmann::json::object();
  EXPECT_TRUE(Has(Refusal(SagaDefinition::FromJson(j)),
                  "unknown key 'headers' in step 'reserve_inventory' forward"));
  j = OrderFulfilment().ToJson();
  j["compensation_order"] = "random";
  EXPECT_TRUE(Has(Refusal(SagaDefinition::FromJson(j)), "compensation_order must be"));
  j = OrderFulfilment().ToJson();
  j["steps"][2]["after"] = "charge_payment";
  EXPECT_TRUE(Has(Refusal(SagaDefinition::FromJson(j)), "after must be an array"));
}

// ---- the planner on graphs ----

class GraphPlannerTest : public ::testing::Test, protected testing::InstanceEvents {
 protected:
  void Start(const SagaDefinition& def) {
    def_ = def;
    Create(def_, {{"amount", 1}});
  }
  void Commit(const std::string& step) {
    Step(step, StepEvent::kStart);
    Step(step, StepEvent::kCommit);
  }
  // a and b are roots, c after a, d after c and b; a, b and c committed, d
  // failed: the saga turns back.
  void StartDiamondAndFailTheJoin() {
    SagaBuilder b("s", 1);
    Undoable(b, "a").After();
    Undoable(b, "b").After();
    Undoable(b, "c").After("a");
    Undoable(b, "d").After("c", "b");
    Start(*b.Build());
    for (const char* s : {"a", "b", "c"}) Commit(s);
    Step("d", StepEvent::kStart);
    Step("d", StepEvent::kFail);
    Saga(SagaEvent::kStartCompensation);
  }
  // "kind:step" for each action.
  std::vector<std::string> Plan() {
    std::vector<std::string> out;
    for (const Action& a : NextActions(def_, inst_))
      out.push_back(std::string(ActionKindName(a.kind)) +
                    (a.step >= 0 ? ":" + inst_.step(a.step).name : ""));
    return out;
  }
  using V = std::vector<std::string>;

  SagaDefinition def_;
};

TEST_F(GraphPlannerTest, IndependentStepsStartTogetherAndTheJoinWaitsForAll) {
  Start(TripBooking());
  EXPECT_EQ(Plan(), (V{"execute:reserve_flight", "execute:reserve_hotel", "execute:reserve_car"}));
  EXPECT_EQ(inst_.ToJson()["current_steps"],
            nlohmann::json({"reserve_flight", "reserve_hotel", "reserve_car"}));
  Step("reserve_flight", StepEvent::kStart);
  Step("reserve_hotel", StepEvent::kStart);
  // STARTED ones are listed for reconciliation (the engine skips those whose
  // request is in flight in this process).
  EXPECT_EQ(Plan(),
            (V{"reconcile:reserve_flight", "reconcile:reserve_hotel", "execute:reserve_car"}));
  Step("reserve_flight", StepEvent::kCommit);
  Step("reserve_hotel", StepEvent::kCommit);
  EXPECT_EQ(Plan(), (V{"execute:reserve_car"}));
  Commit("reserve_car");
  EXPECT_EQ(Plan(), (V{"execute:charge_card"}));
  Commit("charge_card");
  EXPECT_EQ(Plan(), (V{"request_approval:issue_tickets"}));
}

TEST_F(GraphPlannerTest, MaxParallelCapsStepsInFlight) {
  SagaDefinition d = TripBooking();
  d.max_parallel = 2;
  Start(d);
  EXPECT_EQ(Plan(), (V{"execute:reserve_flight", "execute:reserve_hotel"}));
  Step("reserve_flight", StepEvent::kStart);
  Step("reserve_flight", StepEvent::kOutcomeUnknown);  // in doubt still counts
  EXPECT_EQ(Plan(), (V{"reconcile:reserve_flight", "execute:reserve_hotel"}));
}

TEST_F(GraphPlannerTest, AnApprovalDoesNotHoldUpAnIndependentBranch) {
  SagaBuilder b("s", 1);
  Undoable(b, "a").After().RequiresApproval();
  Undoable(b, "b").After();
  Undoable(b, "c").After("b");
  Start(*b.Build());
  EXPECT_EQ(Plan(), (V{"request_approval:a", "execute:b"}));
  Step("a", StepEvent::kRequestApproval);
  EXPECT_EQ(Plan(), (V{"execute:b"}));
  Commit("b");
  EXPECT_EQ(Plan(), (V{"execute:c"}));
  Commit("c");
  EXPECT_EQ(Plan(), (V{"await_approval"}));  // only now does the saga wait
}

TEST_F(GraphPlannerTest, AFailureDrainsSiblingsBeforeAnyUndo) {
  Start(TripBooking());
  Step("reserve_flight", StepEvent::kStart);
  Step("reserve_hotel", StepEvent::kStart);
  Step("reserve_car", StepEvent::kStart);
  Step("reserve_hotel", StepEvent::kCommit);
  Step("reserve_car", StepEvent::kFail);
  EXPECT_EQ(Plan(), (V{"start_compensation:reserve_car"}));
  Saga(SagaEvent::kStartCompensation);
  // The flight is still out: learn its outcome first, undo nothing yet.
  EXPECT_EQ(Plan(), (V{"reconcile:reserve_flight"}));
  Step("reserve_flight", StepEvent::kOutcomeUnknown);
  EXPECT_EQ(Plan(), (V{"reconcile:reserve_flight"}));
  Step("reserve_flight", StepEvent::kCommit);
  EXPECT_EQ(Plan(), (V{"compensate:reserve_hotel", "compensate:reserve_flight"}));
  auto plan = CompensationPlan(def_, inst_);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0]["status"], "ready");
}

TEST_F(GraphPlannerTest, ReverseTopologicalUndoesDependentsFirst) {
  StartDiamondAndFailTheJoin();
  // b has no committed dependent; a waits for c.
  EXPECT_EQ(Plan(), (V{"compensate:c", "compensate:b"}));
  auto plan = CompensationPlan(def_, inst_);
  EXPECT_EQ(plan[0]["status"], "waiting");
  EXPECT_EQ(plan[0]["waits_for"], nlohmann::json({"c"}));
  Step("c", StepEvent::kBeginCompensation);
  EXPECT_EQ(Plan(), (V{"reconcile_compensation:c", "compensate:b"}));
  Step("c", StepEvent::kCompensationDone);
  EXPECT_EQ(Plan(), (V{"compensate:b", "compensate:a"}));
}

TEST_F(GraphPlannerTest, AnUndoInReviewBlocksOnlyItsAncestors) {
  StartDiamondAndFailTheJoin();
  Step("c", StepEvent::kBeginCompensation);
  Step("c", StepEvent::kEscalate);  // refused: in review
  EXPECT_EQ(Plan(), (V{"compensate:b"}));
  Step("b", StepEvent::kBeginCompensation);
  Step("b", StepEvent::kCompensationDone);
  EXPECT_EQ(Plan(), (V{"escalate:c"}));  // only a's undo is left, behind c
}

TEST_F(GraphPlannerTest, ReverseCompletionUndoesOneAtATimeLastCommittedFirst) {
  SagaBuilder b("s", 1);
  b.CompensationOrder(CompensationOrder::kReverseCompletion);
  Undoable(b, "a").After();
  Undoable(b, "b").After();
  Undoable(b, "c").After();
  Undoable(b, "d").After("a", "b", "c");
  Start(*b.Build());
  Commit("b");
  Commit("c");
  Commit("a");
  Step("d", StepEvent::kStart);
  Step("d", StepEvent::kFail);
  Saga(SagaEvent::kStartCompensation);
  EXPECT_EQ(Plan(), (V{"compensate:a"}));
  Step("a", StepEvent::kBeginCompensation);
  EXPECT_EQ(Plan(), (V{"reconcile_compensation:a"}));
  Step("a", StepEvent::kCompensationDone);
  EXPECT_EQ(Plan(), (V{"compensate:c"}));
  Step("c", StepEvent::kBeginCompensation);
  Step("c", StepEvent::kCompensationDone);
  EXPECT_EQ(Plan(), (V{"compensate:b"}));
}

TEST_F(GraphPlannerTest, ALinearSagaGetsTodaysOrderEitherWay) {
  for (CompensationOrder order :
       {CompensationOrder::kReverseTopological, CompensationOrder::kReverseCompletion}) {
    SagaDefinition d = OrderFulfilment();
    d.compensation_order = order;
    Start(d);
    Commit("reserve_inventory");
    Commit("charge_payment");
    Step("create_shipment", StepEvent::kStart);
    Step("create_shipment", StepEvent::kFail);
    Saga(SagaEvent::kStartCompensation);
    EXPECT_EQ(Plan(), (V{"compensate:charge_payment"}));
    Step("charge_payment", StepEvent::kBeginCompensation);
    Step("charge_payment", StepEvent::kCompensationDone);
    EXPECT_EQ(Plan(), (V{"compensate:reserve_inventory"}));
  }
}

// One walk gives what a test of every pair gives: over random DAGs of up to
// 40 steps, out[a] is set exactly when some chosen b != a has a among its
// ancestors (checked against a plain transitive closure).
TEST(AncestorsTest, OneWalkMarksExactlyTheStrictAncestorsOfTheChosenSteps) {
  struct Node {
    std::vector<int> after;
  };
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    int n = 1 + static_cast<int>(rng() % 40);
    std::vector<Node> g(n);
    std::vector<std::vector<char>> before(n, std::vector<char>(n, 0));  // before[b][a]
    for (int b = 0; b < n; ++b)
      for (int a = 0; a < b; ++a)
        if (rng() % 4 == 0) {
          g[b].after.push_back(a);
          before[b][a] = 1;
          for (int x = 0; x < n; ++x)
            if (before[a][x]) before[b][x] = 1;
        }
    std::vector<char> chosen(n);
    for (int b = 0; b < n; ++b) chosen[b] = rng() % 3 == 0;
    std::vector<char> got = AncestorsOfAny(g, [&](int b) { return chosen[b] != 0; });
    for (int a = 0; a < n; ++a) {
      bool want = false;
      for (int b = 0; b < n; ++b) want = want || (chosen[b] && b != a && before[b][a]);
      ASSERT_EQ(got[a] != 0, want) << "round " << round << " step " << a;
    }
  }
}

}  // namespace
}  // namespace sagad
