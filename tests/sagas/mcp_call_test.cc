// A call that is a tool call on an MCP server, and a step's reconcile read
// (sagas/definition.h): their JSON form both ways, and what is refused.
#include <gtest/gtest.h>

#include "sagas/definition.h"
#include "sagas/toolbox.h"

namespace sagad {
namespace {

nlohmann::json MemoryToolbox() {
  return nlohmann::json::parse(R"({
    "kind": "toolbox", "name": "memory_tools", "version": 1,
    "tools": [{
      "name": "remember",
      "arguments_schema": {"type": "object", "required": ["name"],
                           "properties": {"name": {"type": "string"}}},
      "forward": {"mcp": "memory", "tool": "create_entities",
                  "arguments": {"entities": [{"name": "{{args.name}}"}]}},
      "compensation": {"mcp": "memory", "tool": "delete_entities",
                       "arguments": {"entityNames": ["{{args.name}}"]}},
      "reconcile": {"tool": "open_nodes", "arguments": {"names": ["{{args.name}}"]},
                    "committed_if": "/entities/0"}}]})");
}

std::string Refusal(const nlohmann::json& j) {
  auto tb = ToolboxDefinition::FromJson(j);
  return tb.ok() ? "accepted" : tb.status().message();
}

TEST(McpCallTest, AToolCallAndItsReconcileRoundTrip) {
  auto tb = ToolboxDefinition::FromJson(MemoryToolbox());
  ASSERT_TRUE(tb.ok()) << tb.status().ToString();
  const StepDefinition& st = tb->tools[0].step;
  EXPECT_TRUE(st.forward.IsMcp());
  EXPECT_EQ(st.forward.service, "memory");
  EXPECT_EQ(st.forward.path, "create_entities");
  ASSERT_TRUE(st.reconcile.has_value());
  EXPECT_TRUE(st.reconcile->read.IsMcp());
  EXPECT_EQ(st.reconcile->read.service, "memory");
  EXPECT_EQ(st.reconcile->committed_if, "/entities/0");
  auto back = ToolboxDefinition::FromJson(tb->ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *tb);
  EXPECT_EQ(tb->ToJson()["tools"][0]["forward"], MemoryToolbox()["tools"][0]["forward"]);
  EXPECT_EQ(tb->ToJson()["tools"][0]["reconcile"], MemoryToolbox()["tools"][0]["reconcile"]);
}

TEST(McpCallTest, ACallStepRendersTheReconcileAsTheForward) {
  auto tb = ToolboxDefinition::FromJson(MemoryToolbox());
  ASSERT_TRUE(tb.ok());
  auto st = CallStep(
      tb->tools[0], "c1", [](const std::string&) { return false; },
      [](const ApprovalRule&) { return false; });
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->forward.body["entities"][0]["name"], "{{c1.args.name}}");
  EXPECT_EQ(st->reconcile->read.body["names"][0], "{{c1.args.name}}");
}

TEST(McpCallTest, MixedOrBrokenFormsAreRefusedByName) {
  nlohmann::json j = MemoryToolbox();
  j["tools"][0]["forward"]["path"] = "/x";
  EXPECT_NE(Refusal(j).find("\"path\" is a key of an HTTP call"), std::string::npos) << Refusal(j);
  j = MemoryToolbox();
  j["tools"][0]["forward"] = {{"service", "memory"}, {"path", "/x"}, {"tool", "t"}};
  EXPECT_NE(Refusal(j).find("\"tool\" is a key of an MCP call"), std::string::npos) << Refusal(j);
  j = MemoryToolbox();
  j["tools"][0]["forward"] = {{"service", "memory"}, {"method", "MCP"}, {"path", "t"}};
  EXPECT_NE(Refusal(j).find("unsupported method 'MCP'"), std::string::npos) << Refusal(j);
  j = MemoryToolbox();
  j["tools"][0]["forward"]["tool"] = "bad name";
  EXPECT_NE(Refusal(j).find("tool name must be"), std::string::npos) << Refusal(j);
  j = MemoryToolbox();
  j["tools"][0]["reconcile"].erase("committed_if");
  EXPECT_NE(Refusal(j).find("committed_if"), std::string::npos) << Refusal(j);
  j = MemoryToolbox();
  j["tools"][0]["reconcile"]["committed_if"] = "entities";
  EXPECT_NE(Refusal(j).find("is not a JSON Pointer"), std::string::npos) << Refusal(j);
  j = MemoryToolbox();
  j["tools"][0]["reconcile"] = {{"method", "GET"}, {"path", "/x"}, {"committed_if", "/a"}};
  EXPECT_NE(Refusal(j).find("a key of an HTTP call"), std::string::npos) << Refusal(j);
  j = MemoryToolbox();
  j["tools"][0]["reconcile"]["arguments"]["names"][0] = "{{result.x}}";
  EXPECT_NE(Refusal(j).find("must be args.<field>"), std::string::npos) << Refusal(j);
}

TEST(McpCallTest, AnHttpStepMayNameAReadOnItsOwnService) {
  auto def = SagaDefinition::FromJson(nlohmann::json::parse(R"({
    "name": "rest", "input": ["order"],
    "steps": [{"name": "charge",
               "forward": {"service": "stripe", "method": "POST", "path": "/charges",
                           "body": {"order": "{{input.order}}"}},
               "compensation": {"service": "stripe", "method": "POST", "path": "/refunds"},
               "reconcile": {"method": "GET", "path": "/charges/search/{{input.order}}",
                             "committed_if": "/data/0"}}]})"));
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  const ReconcileSpec& r = *def->steps[0].reconcile;
  EXPECT_FALSE(r.read.IsMcp());
  EXPECT_EQ(r.read.service, "stripe");
  EXPECT_EQ(r.read.method, "GET");
  auto back = SagaDefinition::FromJson(def->ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *def);
  nlohmann::json bad = def->ToJson();
  bad["steps"][0]["reconcile"]["path"] = "/charges/{{charge.result.id}}";
  auto refused = SagaDefinition::FromJson(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("reconcile refers to step 'charge'"), std::string::npos)
      << refused.status().message();
}

TEST(McpCallTest, AnUnconfiguredServerIsNamedAsAnMcpServer) {
  auto tb = ToolboxDefinition::FromJson(MemoryToolbox());
  ASSERT_TRUE(tb.ok());
  const ToolDefinition* t = nullptr;
  const CallSpec* c = FirstUnconfiguredCall(
      *tb, [](const CallSpec& call) { return !call.IsMcp(); }, &t);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(CalleeText(*c), "MCP server 'memory'");
}

}  // namespace
}  // namespace sagad
