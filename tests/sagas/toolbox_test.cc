// Toolboxes (sagas/toolbox.h) and runs (the run parts of sagas/instance.h and
// policies/planner.h): what is refused at registration, what a call becomes,
// how a run's calls go one at a time and are undone in reverse.
#include "sagas/toolbox.h"

#include <gtest/gtest.h>

#include "examples/examples.h"
#include "policies/planner.h"
#include "sagas/instance.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

nlohmann::json SocJson() { return SocTools().ToJson(); }

std::string Refusal(const nlohmann::json& j) {
  auto tb = ToolboxDefinition::FromJson(j);
  return tb.ok() ? "accepted" : tb.status().message();
}

TEST(ToolboxTest, JsonRoundTripsToTheSameToolbox) {
  auto back = ToolboxDefinition::FromJson(SocJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, SocTools());
  EXPECT_TRUE(IsToolboxJson(SocJson()));
  EXPECT_FALSE(IsToolboxJson(IncidentResponse().ToJson()));
}

TEST(ToolboxTest, RefusalsNameTheToolAndTheKey) {
  nlohmann::json j = SocJson();
  j["tools"][1].erase("compensation");
  EXPECT_NE(Refusal(j).find("tool 'block_ip' is reversible but has no compensation"),
            std::string::npos);
  j = SocJson();
  j["tools"][3]["compensation"] = j["tools"][1]["compensation"];
  EXPECT_NE(Refusal(j).find("'notify_user' is irreversible but declares a compensation"),
            std::string::npos);
  j = SocJson();
  j["tools"][1]["forward"]["body"]["ip"] = "{{args.address}}";
  EXPECT_NE(Refusal(j).find("argument 'address', which its arguments_schema does not declare"),
            std::string::npos);
  j = SocJson();
  j["tools"][1]["forward"]["path"] = "/ips/{{result.ref}}";
  EXPECT_NE(Refusal(j).find("known only to its compensation"), std::string::npos);
  j = SocJson();
  j["tools"][1]["forward"]["path"] = "/ips/{{block_ip.ref}}";
  EXPECT_NE(Refusal(j).find("must be args.<field>, input.<field>, calls.<call_id>.<field>"),
            std::string::npos);
  j = SocJson();
  j["tools"][1]["after"] = {"create_ticket"};
  EXPECT_NE(Refusal(j).find("a tool has no \"after\""), std::string::npos);
  j = SocJson();
  j["tools"].push_back(j["tools"][0]);
  EXPECT_NE(Refusal(j).find("duplicate tool 'create_ticket'"), std::string::npos);
  j = SocJson();
  j["on_idle"] = "panic";
  EXPECT_NE(Refusal(j).find("on_idle must be"), std::string::npos);
  j = SocJson();
  j["tools_"] = 1;
  EXPECT_NE(Refusal(j).find("tools_"), std::string::npos);
  j = SocJson();
  j["tools"][2]["approval_if"] = {{"field", "who"}, {"op", "=="}, {"value", "root"}};
  EXPECT_NE(Refusal(j).find("approval_if names argument 'who'"), std::string::npos);
  j = SocJson();
  j["tools"][0]["arguments_schema"] = {{"type", "object"}, {"patternProperties", {}}};
  EXPECT_NE(Refusal(j).find("arguments_schema"), std::string::npos);
  // The names sagad's MCP server takes: its run tools, and the arguments it
  // passes among a tool's (the call's name, the run's handle).
  j = SocJson();
  j["tools"][1]["name"] = "finish_run";
  EXPECT_NE(Refusal(j).find("tool name 'finish_run' is taken"), std::string::npos);
  j = SocJson();
  j["tools"][1]["arguments_schema"]["properties"]["run"] = {{"type", "string"}};
  EXPECT_NE(Refusal(j).find("may not be named run"), std::string::npos);
  // Guards: a tool that is not there, both a count and a sum, a sum of an
  // argument not declared, a window out of range.
  j = SocJson();
  j["guards"] = {{{"tool", "nope"}, {"max_calls", 1}}};
  EXPECT_NE(Refusal(j).find("guards[0].tool: the toolbox has no tool 'nope'"), std::string::npos);
  j["guards"] = {{{"tool", "block_ip"}, {"max_calls", 1}, {"sum", "ip"}, {"max", 1}}};
  EXPECT_NE(Refusal(j).find("either max_calls or sum"), std::string::npos);
  j["guards"] = {{{"tool", "block_ip"}, {"sum", "amount"}, {"max", 1}}};
  EXPECT_NE(Refusal(j).find("declares no argument 'amount'"), std::string::npos);
  j["guards"] = {{{"tool", "block_ip"}, {"max_calls", 1}, {"window_s", 0}}};
  EXPECT_NE(Refusal(j).find("window_s"), std::string::npos);
  j["guards"] = {{{"tool", "block_ip"}, {"max_calls", 1}, {"per", "tenant"}}};
  EXPECT_NE(Refusal(j).find("per must be"), std::string::npos);
  j["guards"] = {
      {{"tool", "block_ip"}, {"max_calls", 2}, {"per", "principal"}, {"then", "approval"}}};
  EXPECT_EQ(Refusal(j), "accepted");
  auto back = ToolboxDefinition::FromJson(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->guards[0].name, "block_ip.max_calls.principal");
  EXPECT_EQ(ToolboxDefinition::FromJson(back->ToJson())->ToJson(), back->ToJson());
}

// A guard's verdict counts what may take effect (in flight, unclear,
// committed), not what failed or was refused or undone, within its window.
TEST(ToolboxTest, AGuardCountsWhatMayTakeEffectWithinItsWindow) {
  Guard g;
  g.name = "spend";
  g.tool = "refund";
  g.sum = "amount";
  g.max = 100;
  g.window_s = 60;
  const int64_t now = 1'000'000;
  std::vector<GuardedCall> made = {{"refund", {{"amount", 40}}, "COMMITTED", now - 1000},
                                   {"refund", {{"amount", 30}}, "UNKNOWN", now - 2000},
                                   {"refund", {{"amount", 500}}, "FAILED", now - 1000},
                                   {"refund", {{"amount", 500}}, "COMPENSATED", now - 1000},
                                   {"refund", {{"amount", 90}}, "COMMITTED", now - 61'000},
                                   {"other", {{"amount", 90}}, "COMMITTED", now}};
  EXPECT_EQ(*OverGuard(g, made, "refund", {{"amount", 30}}, now), "");
  EXPECT_NE(OverGuard(g, made, "refund", {{"amount", 31}}, now)->find("guard 'spend'"),
            std::string::npos);
  EXPECT_EQ(OverGuard(g, made, "refund", {{"amount", "x"}}, now).status().code(),
            StatusCode::kInvalidArgument);
  g.sum.clear();
  g.max_calls = 2;
  EXPECT_NE(*OverGuard(g, made, "refund", nlohmann::json::object(), now), "");
  g.max_calls = 3;
  EXPECT_EQ(*OverGuard(g, made, "refund", nlohmann::json::object(), now), "");
  EXPECT_EQ(*OverGuard(g, made, "other", nlohmann::json::object(), now), "");
}

TEST(ToolboxTest, ACallBecomesAStepNamedByItsCallId) {
  auto tb =
      ToolboxBuilder("t", 1)
          .Tool("close", "", {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}}}}}})
          .Call("svc", "POST", "/tickets/{{calls.c1.ref}}/close", {{"n", "{{args.n}}"}})
          .Compensate("svc", "POST", "/tickets/{{result.id}}/reopen")
          .RequiresApprovalIf("n", ">", 5)
          .Build();
  ASSERT_TRUE(tb.ok()) << tb.status().ToString();
  const ToolDefinition& tool = tb->tools[0];
  auto known = [](const std::string& c) { return c == "c1"; };
  auto st = CallStep(tool, "c2", known, [](const ApprovalRule&) { return true; });
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->name, "c2");
  EXPECT_EQ(st->forward.path, "/tickets/{{c1.result.ref}}/close");
  EXPECT_EQ(st->forward.body, nlohmann::json({{"n", "{{c2.args.n}}"}}));
  EXPECT_EQ(st->compensation->path, "/tickets/{{c2.result.id}}/reopen");
  EXPECT_TRUE(st->requires_approval);  // its rule held
  EXPECT_FALSE(st->approval_if);
  auto no = CallStep(tool, "c2", known, [](const ApprovalRule&) { return false; });
  EXPECT_FALSE(no->requires_approval);
  auto unknown = CallStep(
      tool, "c2", [](const std::string&) { return false; },
      [](const ApprovalRule&) { return false; });
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("refers to call 'c1'"), std::string::npos);
  EXPECT_FALSE(IsCallId("input"));
  EXPECT_FALSE(IsCallId("a.b"));
  EXPECT_TRUE(IsCallId("call-1_x"));
}

// A run of soc_tools built event by event, as the engine writes it.
class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SagaDefinition def;
    def.name = "soc_tools";
    def.run = true;
    def.idle_timeout_ms = 1000;
    ASSERT_TRUE(
        Add(Instance::CreatedEvent("r1", def, {{"incident", "INC-1"}}, nullptr, {{"agent", "bot"}}))
            .ok());
  }
  Status Add(Event e) {
    e.seq = inst_.last_seq() + 1;
    e.at_ms = 1000 + e.seq;
    Status s = inst_.Apply(e);
    if (s.ok()) log_.push_back(e);
    return s;
  }
  Status Step(const std::string& step, const std::string& type, nlohmann::json data = {}) {
    Event e;
    e.type = type;
    e.step = step;
    e.data = data.is_null() ? nlohmann::json::object() : data;
    return Add(e);
  }
  Status Call(const std::string& id, const std::string& tool, nlohmann::json args) {
    const ToolboxDefinition tb = SocTools();
    auto st = CallStep(
        *tb.Tool(tool), id, [&](const std::string& c) { return inst_.StepIndex(c) >= 0; },
        [](const ApprovalRule&) { return false; });
    if (!st.ok()) return st.status();
    return Step(id, "call_appended",
                {{"tool", tool}, {"arguments", args}, {"definition", StepToJson(*st)}});
  }
  Action Next() { return NextAction(*inst_.run_definition(), inst_); }

  Instance inst_;
  std::vector<Event> log_;
};

TEST_F(RunTest, ARunIsOpenWithNoCallsAndItsViewListsItsCalls) {
  EXPECT_TRUE(inst_.is_run());
  EXPECT_STREQ(inst_.StatusName(), "OPEN");
  EXPECT_TRUE(inst_.Settled());
  EXPECT_EQ(Next().kind, ActionKind::kNone);  // waits for its agent, never completes alone
  ASSERT_TRUE(
      Call("t1", "create_ticket", {{"title", "x"}, {"severity", "high"}, {"source_ip", "8.8.8.8"}})
          .ok());
  EXPECT_FALSE(inst_.Settled());
  nlohmann::json view = inst_.ToJson();
  EXPECT_EQ(view["kind"], "run");
  EXPECT_EQ(view["status"], "OPEN");
  EXPECT_EQ(view["metadata"]["agent"], "bot");
  ASSERT_EQ(view["calls"].size(), 1u);
  EXPECT_EQ(view["calls"][0]["call_id"], "t1");
  EXPECT_EQ(view["calls"][0]["tool"], "create_ticket");
  EXPECT_EQ(view["calls"][0]["arguments"]["source_ip"], "8.8.8.8");
  EXPECT_EQ(inst_.SnapshotText(), DumpJson(view));
  auto replayed = Instance::Replay("r1", log_);
  ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
  EXPECT_EQ(replayed->ToJson(), view);
  EXPECT_FALSE(Call("t1", "block_ip", {{"ip", "1.2.3.4"}}).ok());  // the call_id is taken
}

TEST_F(RunTest, CallsGoOneAtATimeAndAFailedCallDoesNotTurnTheRunBack) {
  ASSERT_TRUE(
      Call("t1", "create_ticket", {{"title", "x"}, {"severity", "high"}, {"source_ip", "8.8.8.8"}})
          .ok());
  ASSERT_TRUE(Call("b1", "block_ip", {{"ip", "8.8.8.8"}}).ok());
  Action a = Next();
  EXPECT_EQ(a.kind, ActionKind::kExecute);
  EXPECT_EQ(a.step, 0);
  EXPECT_EQ(NextActions(*inst_.run_definition(), inst_).size(), 1u);  // b1 waits for t1
  ASSERT_TRUE(Step("t1", "started", {{"key", "r1:t1"}}).ok());
  EXPECT_EQ(Next().kind, ActionKind::kReconcile);  // in flight: nothing else starts
  ASSERT_TRUE(Step("t1", "failed", {{"error", "422"}}).ok());
  a = Next();
  EXPECT_EQ(a.kind, ActionKind::kExecute);  // the agent's next call goes on
  EXPECT_EQ(a.step, 1);
  ASSERT_TRUE(Step("b1", "started", {{"key", "r1:b1"}}).ok());
  ASSERT_TRUE(Step("b1", "committed", {{"result", {{"ref", "ip-1"}}}}).ok());
  EXPECT_EQ(Next().kind, ActionKind::kNone);
  EXPECT_TRUE(inst_.Settled());
  EXPECT_STREQ(inst_.StatusName(), "OPEN");
}

TEST_F(RunTest, AbortUndoesTheCommittedCallsInReverseOrder) {
  ASSERT_TRUE(
      Call("t1", "create_ticket", {{"title", "x"}, {"severity", "high"}, {"source_ip", "8.8.8.8"}})
          .ok());
  ASSERT_TRUE(Call("b1", "block_ip", {{"ip", "8.8.8.8"}}).ok());
  ASSERT_TRUE(Call("d1", "disable_account", {{"user", "bob"}}).ok());
  for (const char* c : {"t1", "b1", "d1"}) {
    ASSERT_TRUE(Step(c, "started", {{"key", std::string("r1:") + c}}).ok());
    ASSERT_TRUE(Step(c, "committed", {{"result", {{"ref", c}}}}).ok());
  }
  EXPECT_EQ(PivotInPlay(*inst_.run_definition(), inst_), -1);
  Event turn;
  turn.type = "saga_compensating";
  ASSERT_TRUE(Add(turn).ok());
  std::vector<std::string> undone;
  for (int guard = 0; guard < 10; ++guard) {
    Action a = Next();
    if (a.kind != ActionKind::kCompensate) break;
    const std::string name = inst_.step(a.step).name;
    undone.push_back(name);
    ASSERT_TRUE(Step(name, "compensation_started", {{"key", "r1:" + name + ":undo"}}).ok());
    ASSERT_TRUE(Step(name, "compensated").ok());
  }
  EXPECT_EQ(undone, (std::vector<std::string>{"d1", "b1", "t1"}));
  EXPECT_EQ(Next().kind, ActionKind::kFinishCompensation);
}

TEST_F(RunTest, AnIrreversibleCallThatStartedIsThePivot) {
  ASSERT_TRUE(Call("n1", "notify_user", {{"to", "bob"}, {"body", "hi"}}).ok());
  EXPECT_EQ(Next().kind, ActionKind::kRequestApproval);  // irreversible: an operator approves
  ASSERT_TRUE(Step("n1", "approval_requested").ok());
  ASSERT_TRUE(Step("n1", "approved", {{"by", "op"}}).ok());
  EXPECT_EQ(PivotInPlay(*inst_.run_definition(), inst_), -1);
  ASSERT_TRUE(Step("n1", "started", {{"key", "r1:n1"}}).ok());
  EXPECT_EQ(PivotInPlay(*inst_.run_definition(), inst_), 0);
}

// One builder of a run's definition: a call at a time, undone in the
// reverse order of completion, idle as its toolbox says.
TEST(ToolboxTest, ARunIsDrivenByTheOneDefinitionItsToolboxGives) {
  SagaDefinitionPtr def = RunDefinition("soc_tools", 3, 60000, true);
  EXPECT_EQ(def->name, "soc_tools");
  EXPECT_EQ(def->version, 3);
  EXPECT_TRUE(def->run);
  EXPECT_EQ(def->max_parallel, 1);
  EXPECT_EQ(def->compensation_order, CompensationOrder::kReverseCompletion);
  EXPECT_EQ(def->idle_timeout_ms, 60000);
  EXPECT_TRUE(def->idle_abort);
}

}  // namespace
}  // namespace sagad
