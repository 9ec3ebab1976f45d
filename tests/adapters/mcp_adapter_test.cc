// McpAdapter (adapters/mcp_adapter.h): a tool call's outcome from what the
// server answered, a reconcile read's answer, and real stdio servers from
// npm (test-only, pinned in tests/package-lock.json: the memory and the
// everything reference servers) started, called, killed and restarted.
#include "adapters/mcp_adapter.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "adapters/classify.h"

namespace sagad {
namespace {

std::string ServerScript(const std::string& package) {
  return std::string(SAGAD_SOURCE_DIR) + "/tests/node_modules/@modelcontextprotocol/" + package +
         "/dist/index.js";
}

bool NodeServersInstalled() {
  return access(ServerScript("server-memory").c_str(), R_OK) == 0 &&
         access(ServerScript("server-everything").c_str(), R_OK) == 0 &&
         std::system("node --version > /dev/null 2>&1") == 0;
}

TEST(McpCallResultTest, WhatTheServerAnsweredIsTheOutcome) {
  McpReply r;
  r.error = "no session";
  EXPECT_EQ(McpCallResult(r).outcome, Outcome::kNotExecuted);
  r.sent = true;
  r.error = "no reply within timeout_ms";
  EXPECT_EQ(McpCallResult(r).outcome, Outcome::kUnknown);
  r.replied = true;
  r.error_code = -32602;
  r.error = "Unknown tool";
  EXPECT_EQ(McpCallResult(r).outcome, Outcome::kFailed);
  r.error_code = -32603;
  EXPECT_EQ(McpCallResult(r).outcome, Outcome::kUnknown);
  r.error.clear();
  r.result = {{"isError", true}, {"content", {{{"type", "text"}, {"text", "no such entity"}}}}};
  CallResult failed = McpCallResult(r);
  EXPECT_EQ(failed.outcome, Outcome::kFailed);
  EXPECT_NE(failed.error.find("no such entity"), std::string::npos);
  r.result = {{"structuredContent", {{"id", "e-1"}}}, {"content", nlohmann::json::array()}};
  CallResult done = McpCallResult(r);
  EXPECT_EQ(done.outcome, Outcome::kCommitted);
  EXPECT_EQ(done.result["id"], "e-1");
  EXPECT_EQ(done.external_ref, "e-1");
  r.result = {{"content", {{{"type", "text"}, {"text", "[1, 2]"}}}}};
  EXPECT_EQ(McpCallResult(r).result, nlohmann::json::parse("[1, 2]"));
  r.result = {{"content", {{{"type", "text"}, {"text", "plain words"}}}}};
  EXPECT_EQ(McpCallResult(r).result["content"][0]["text"], "plain words");
}

TEST(ClassifyReadAnswerTest, ThePointerSaysWhetherTheEffectIsThere) {
  CallResult read;
  read.outcome = Outcome::kCommitted;
  read.result = {{"entities", {{{"name", "alice"}}}}};
  QueryResult q = ClassifyReadAnswer(read, "/entities/0");
  EXPECT_EQ(q.outcome, QueryOutcome::kHappened);
  EXPECT_EQ(q.result, read.result);
  read.result = {{"entities", nlohmann::json::array()}};
  EXPECT_EQ(ClassifyReadAnswer(read, "/entities/0").outcome, QueryOutcome::kNotHappened);
  read.result = {{"entities", "not an array"}};
  EXPECT_EQ(ClassifyReadAnswer(read, "/entities/0").outcome, QueryOutcome::kNotHappened);
  read.outcome = Outcome::kFailed;
  EXPECT_EQ(ClassifyReadAnswer(read, "/entities/0").outcome, QueryOutcome::kUnknown);
  read.outcome = Outcome::kUnknown;
  EXPECT_EQ(ClassifyReadAnswer(read, "/entities/0").outcome, QueryOutcome::kUnknown);
}

TEST(CheckToolCallTest, ACallIsCheckedAgainstTheToolsInputSchema) {
  const nlohmann::json tools = nlohmann::json::parse(R"([
    {"name": "create_entities",
     "inputSchema": {"type": "object", "required": ["entities"], "additionalProperties": false,
                     "properties": {"entities": {"type": "array"}}}},
    {"name": "read_graph", "inputSchema": {"type": "object"}}])");
  EXPECT_TRUE(
      CheckToolCall(tools, "memory", "create_entities", {{"entities", "{{args.list}}"}}).ok());
  EXPECT_TRUE(CheckToolCall(tools, "memory", "read_graph", {{"anything", 1}}).ok());
  Status s = CheckToolCall(tools, "memory", "crate_entities", nlohmann::json::object());
  EXPECT_EQ(s.message(),
            "MCP server 'memory' has no tool 'crate_entities' (it has: create_entities, "
            "read_graph)");
  s = CheckToolCall(tools, "memory", "create_entities", nlohmann::json::object());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("requires argument 'entities'"), std::string::npos);
  s = CheckToolCall(tools, "memory", "create_entities", {{"entities", 1}, {"extra", 2}});
  EXPECT_NE(s.message().find("takes no argument 'extra'"), std::string::npos);
}

class McpStdioTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!NodeServersInstalled())
      GTEST_SKIP() << "the npm test servers are not installed (scripts/test_deps.sh)";
    char tmpl[] = "/tmp/sagad-mcp-XXXXXX";
    dir_ = mkdtemp(tmpl);
    // sagad's own environment names another file: the config's must win.
    setenv("MEMORY_FILE_PATH", (dir_ + "/not-this.jsonl").c_str(), 1);
    McpServerConfig memory;
    memory.service.name = "memory";
    memory.service.timeout_ms = 10000;
    memory.command = {"node", ServerScript("server-memory")};
    memory.env = {{"MEMORY_FILE_PATH", dir_ + "/memory.jsonl"}};
    McpServerConfig everything;
    everything.service.name = "everything";
    everything.service.timeout_ms = 10000;
    // Through the relay of tests/mcp: it notes each tool call the server has.
    everything.command = {"python3", std::string(SAGAD_SOURCE_DIR) + "/tests/mcp/stdio_relay.py",
                          "node", ServerScript("server-everything"), "stdio"};
    everything.env = {{"RELAY_SEEN_FILE", dir_ + "/seen"}};
    adapter_ = std::make_unique<McpAdapter>(
        std::map<std::string, ServiceConfig>{},
        std::map<std::string, McpServerConfig>{{"memory", memory}, {"everything", everything}}, 1);
  }
  void TearDown() override {
    adapter_.reset();
    unsetenv("MEMORY_FILE_PATH");
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }

  CallResult CallTool(const std::string& server, const std::string& tool, nlohmann::json args) {
    CallRequest req;
    req.service = server;
    req.method = "MCP";
    req.path = tool;
    req.body = std::move(args);
    req.idempotency_key = "i-1:" + tool;
    return adapter_->Call(req);
  }

  // The pid of a child of `parent` whose command line holds `what`, or 0.
  static pid_t ChildPid(pid_t parent, const std::string& what) {
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(entry.path() / "stat");
      std::string pid, comm, state;
      int ppid = 0;
      stat >> pid >> comm >> state >> ppid;
      if (ppid != parent) continue;
      std::ifstream cmd(entry.path() / "cmdline");
      std::string line((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
      for (char& c : line)
        if (c == '\0') c = ' ';
      if (line.find(what) != std::string::npos) return std::stoi(name);
    }
    return 0;
  }

  // The everything server (under its relay).
  static pid_t EverythingPid() {
    return ChildPid(ChildPid(getpid(), "stdio_relay.py"), "server-everything");
  }

  bool Seen(const std::string& tool) const {
    std::ifstream in(dir_ + "/seen");
    std::string line;
    while (std::getline(in, line))
      if (line == tool) return true;
    return false;
  }

  std::string dir_;
  std::unique_ptr<McpAdapter> adapter_;
};

TEST_F(McpStdioTest, AToolCallCommitsAndAReadFindsItsEffect) {
  const ServiceConfig* svc = adapter_->Service("memory");
  ASSERT_NE(svc, nullptr);
  EXPECT_TRUE(svc->mcp);
  EXPECT_FALSE(svc->queryable);
  EXPECT_FALSE(svc->idempotent);
  CallResult created =
      CallTool("memory", "create_entities",
               {{"entities", {{{"name", "alice"}, {"entityType", "t"}, {"observations", {"x"}}}}}});
  ASSERT_EQ(created.outcome, Outcome::kCommitted) << created.error;
  EXPECT_EQ(access((dir_ + "/memory.jsonl").c_str(), R_OK), 0);
  EXPECT_NE(access((dir_ + "/not-this.jsonl").c_str(), R_OK), 0);
  CallResult read = CallTool("memory", "open_nodes", {{"names", {"alice"}}});
  EXPECT_EQ(ClassifyReadAnswer(read, "/entities/0").outcome, QueryOutcome::kHappened);
  read = CallTool("memory", "open_nodes", {{"names", {"bob"}}});
  EXPECT_EQ(ClassifyReadAnswer(read, "/entities/0").outcome, QueryOutcome::kNotHappened);
  auto tools = adapter_->ListTools("memory");
  ASSERT_TRUE(tools.ok()) << tools.status().ToString();
  EXPECT_TRUE(CheckToolCall(*tools, "memory", "open_nodes", {{"names", {"x"}}}).ok());
  CallResult unknown_tool = CallTool("memory", "no_such_tool", nlohmann::json::object());
  EXPECT_EQ(unknown_tool.outcome, Outcome::kFailed) << unknown_tool.error;
}

TEST_F(McpStdioTest, AServerInheritsNoFileOfSagads) {
  ASSERT_EQ(CallTool("everything", "echo", {{"message", "up"}}).outcome, Outcome::kCommitted);
  // A file sagad holds open (as it does its store's, without close-on-exec).
  const std::string held = dir_ + "/held-by-sagad";
  FILE* f = fopen(held.c_str(), "w");
  ASSERT_NE(f, nullptr);
  const pid_t old = EverythingPid();
  ASSERT_GT(old, 0);
  ASSERT_EQ(kill(old, SIGKILL), 0);  // its next start is after the file was opened
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  pid_t now = 0;
  while ((now = EverythingPid()) == old || now == 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "not restarted";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(CallTool("everything", "echo", {{"message", "x"}}).outcome, Outcome::kCommitted);
  const pid_t relay = ChildPid(getpid(), "stdio_relay.py");
  ASSERT_GT(relay, 0);
  int fds = 0;
  for (const auto& fd :
       std::filesystem::directory_iterator("/proc/" + std::to_string(relay) + "/fd")) {
    std::error_code ec;
    EXPECT_NE(std::filesystem::read_symlink(fd.path(), ec).string(), held);
    ++fds;
  }
  EXPECT_GT(fds, 2);
  fclose(f);
}

TEST_F(McpStdioTest, AServerKilledMidCallLeavesItUnknownAndIsRestarted) {
  ASSERT_EQ(CallTool("everything", "echo", {{"message", "hi"}}).outcome, Outcome::kCommitted);
  const pid_t pid = EverythingPid();
  ASSERT_GT(pid, 0);
  auto slow = std::async(std::launch::async, [&] {
    return CallTool("everything", "trigger-long-running-operation",
                    {{"duration", 8}, {"steps", 8}});
  });
  // Once the server has the call, it dies.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!Seen("trigger-long-running-operation") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(Seen("trigger-long-running-operation"));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  CallResult lost = slow.get();
  EXPECT_EQ(lost.outcome, Outcome::kUnknown) << lost.error;
  EXPECT_NE(lost.error.find("exited"), std::string::npos) << lost.error;
  // The supervisor starts it again; the next call waits for it, unsent.
  CallResult again = CallTool("everything", "echo", {{"message", "back"}});
  EXPECT_EQ(again.outcome, Outcome::kCommitted) << again.error;
  EXPECT_NE(EverythingPid(), pid);
}

}  // namespace
}  // namespace sagad
