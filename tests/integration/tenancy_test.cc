// Agents as tenants, over real HTTP against a real sagad and example-services
// (docs/agents.md, "Agents are tenants"): no definition at any path crashes
// sagad; a failed call fails alone; a run belongs to the principal that
// opened it (calls, finish, abort, reads, keys, MCP sessions); every event
// says who; a web page cannot drive a tokenless sagad (Host and Origin);
// /metrics has no label a client chooses and needs a token; the bounds on
// what a run keeps and how many a principal opens; a base_url that would
// split a request is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

const nlohmann::json kTokens = {
    {{"name", "agent-a"}, {"token", "token-a"}, {"role", "submitter"}},
    {{"name", "agent-b"}, {"token", "token-b"}, {"role", "submitter"}},
    {{"name", "alice"}, {"token", "operator-token"}, {"role", "operator"}},
    {{"name", "root"}, {"token", "admin-token"}, {"role", "admin"}}};

std::map<std::string, std::string> As(const std::string& token,
                                      std::map<std::string, std::string> extra = {}) {
  extra["Authorization"] = "Bearer " + token;
  extra["Content-Type"] = "application/json";
  return extra;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TenancyTest : public ::testing::Test {
 protected:
  void Start(nlohmann::json overrides = nlohmann::json::object(), nlohmann::json extra = {}) {
    sagad_ = std::make_unique<Coordinator>(downstream_, dir_.path() + "/data", overrides, kTokens);
    sagad_->UseToken("operator-token");
    if (extra.is_object()) sagad_->Configure(extra);
    ASSERT_GT(sagad_->Start(), 0);
  }
  Reply Call(const std::string& token, const std::string& method, const std::string& path,
             const nlohmann::json& body = nullptr, std::map<std::string, std::string> extra = {}) {
    return Http(sagad_->port(), method, path, body.is_null() ? "" : body.dump(),
                As(token, std::move(extra)));
  }
  std::string Open(const std::string& token, const std::string& key = "") {
    std::map<std::string, std::string> h;
    if (!key.empty()) h["Idempotency-Key"] = key;
    Reply r = Call(token, "POST", "/v1/toolboxes/soc_tools/runs",
                   {{"input", {{"incident", "INC-1"}}}, {"metadata", {{"agent", token}}}}, h);
    EXPECT_EQ(r.status, 201) << r.raw;
    return r.body.value("id", "");
  }
  Reply Tool(const std::string& token, const std::string& run, const std::string& call_id,
             const std::string& tool, const nlohmann::json& args) {
    return Call(token, "POST", "/v1/instances/" + run + "/calls?wait=10",
                {{"call_id", call_id}, {"tool", tool}, {"arguments", args}});
  }
  TempDir dir_;
  Downstream downstream_;
  std::unique_ptr<Coordinator> sagad_;
};

// Seen failing on main 4372162: sagad died (SIGSEGV) answering the PUT.
TEST_F(TenancyTest, ADefinitionOfAnyKindAtAnyPathIsAnsweredAndNeverCrashesSagad) {
  Start();
  nlohmann::json toolbox = nlohmann::json::parse(
      Slurp(std::string(SAGAD_SOURCE_DIR) + "/examples/definitions/soc_tools.json"));
  toolbox["name"] = "my_tools";
  toolbox["version"] = 1;
  nlohmann::json saga = nlohmann::json::parse(
      Slurp(std::string(SAGAD_SOURCE_DIR) + "/examples/definitions/order_fulfilment.json"));
  saga["name"] = "my_saga";
  saga["version"] = 1;
  // A toolbox at the sagas' path: refused, naming the right path.
  Reply wrong = Call("admin-token", "PUT", "/v1/sagas/my_tools/versions/1", toolbox);
  EXPECT_EQ(wrong.status, 400) << wrong.raw;
  EXPECT_NE(wrong.body.value("detail", "").find("/v1/toolboxes/my_tools/versions/1"),
            std::string::npos)
      << wrong.raw;
  // A saga at the toolboxes' path: refused too.
  Reply saga_there = Call("admin-token", "PUT", "/v1/toolboxes/my_saga/versions/1", saga);
  EXPECT_GE(saga_there.status, 400) << saga_there.raw;
  EXPECT_LT(saga_there.status, 500) << saga_there.raw;
  // Each where it belongs: deployed, and read back by its own path only.
  Reply tb = Call("admin-token", "PUT", "/v1/toolboxes/my_tools/versions/1", toolbox);
  EXPECT_EQ(tb.status, 201) << tb.raw;
  Reply sg = Call("admin-token", "PUT", "/v1/sagas/my_saga/versions/1", saga);
  EXPECT_EQ(sg.status, 201) << sg.raw;
  EXPECT_EQ(Call("admin-token", "GET", "/v1/sagas/my_tools/versions/1").status, 404);
  EXPECT_EQ(Call("admin-token", "GET", "/v1/toolboxes/my_saga/versions/1").status, 404);
  EXPECT_EQ(Call("admin-token", "GET", "/v1/toolboxes/my_tools/versions/1").status, 200);
  // A run of a saga, an instance of a toolbox: refused, not a crash.
  Reply run_of_saga = Call("token-a", "POST", "/v1/toolboxes/my_saga/runs", {{"input", {}}});
  EXPECT_GE(run_of_saga.status, 400) << run_of_saga.raw;
  EXPECT_LT(run_of_saga.status, 500) << run_of_saga.raw;
  Reply saga_of_tb = Call("token-a", "POST", "/v1/sagas/my_tools/instances", {{"input", {}}});
  EXPECT_GE(saga_of_tb.status, 400) << saga_of_tb.raw;
  EXPECT_LT(saga_of_tb.status, 500) << saga_of_tb.raw;
  // sagactl deploy of a toolbox file deploys it as a toolbox.
  toolbox["version"] = 2;
  const std::string file = dir_.path() + "/tools.json";
  std::ofstream(file) << toolbox.dump();
  Subprocess ctl({SAGACTL_BIN, "deploy", file},
                 {{"SAGAD_URL", "http://127.0.0.1:" + std::to_string(sagad_->port())},
                  {"SAGAD_TOKEN", "admin-token"}});
  std::string out = ctl.ReadOutput();
  EXPECT_EQ(ctl.Wait(), 0) << out;
  EXPECT_NE(out.find("toolbox my_tools version 2 deployed"), std::string::npos) << out;
  EXPECT_EQ(Call("admin-token", "GET", "/v1/toolboxes/my_tools/versions/2").status, 200);
  EXPECT_TRUE(sagad_->process().Running());
  EXPECT_EQ(sagad_->Get("/healthz").status, 200);
}

// Seen failing on main 4372162: the run went COMPENSATING/COMPENSATED, the
// blocked IP was unblocked and the next call got 409.
TEST_F(TenancyTest, AFailedCallFailsAloneAndTheRunStaysOpen) {
  Start();
  const std::string run = Open("token-a");
  Reply block = Tool("token-a", run, "block", "block_ip", {{"ip", "198.51.100.7"}});
  ASSERT_EQ(block.body["status"], "COMMITTED") << block.raw;
  downstream_.Fault({{"path", "/accounts/disable"}, {"action", "reject"}, {"status", 422}});
  Reply disable = Tool("token-a", run, "disable", "disable_account", {{"user", "ceo"}});
  ASSERT_EQ(disable.status, 200) << disable.raw;
  EXPECT_EQ(disable.body["status"], "FAILED") << disable.raw;
  EXPECT_EQ(disable.body["run_status"], "OPEN") << disable.raw;
  EXPECT_NE(disable.body.value("last_error", "").find("422"), std::string::npos) << disable.raw;
  nlohmann::json view = sagad_->Get("/v1/instances/" + run).body;
  EXPECT_EQ(view["status"], "OPEN");
  EXPECT_EQ(view["calls"][0]["status"], "COMMITTED") << view.dump();
  EXPECT_EQ(downstream_.RouteCount("unblock_ip"), 0);
  // The agent decides: another call goes through, then it finishes.
  Reply again = Tool("token-a", run, "disable2", "disable_account", {{"user", "bob"}});
  EXPECT_EQ(again.body["status"], "COMMITTED") << again.raw;
  Reply done = Call("token-a", "POST", "/v1/instances/" + run + "/finish", {});
  EXPECT_EQ(done.status, 200) << done.raw;
  EXPECT_EQ(done.body["status"], "COMPLETED") << done.raw;
}

// Seen failing on main 4372162: the run was compensated and the call stayed
// PLANNED.
TEST_F(TenancyTest, ACallWhoseRetriesRunOutEndsFailedAndUndoesNothing) {
  Start({{"iam",
          {{"retry", {{"max_attempts", 2}, {"initial_backoff_ms", 10}, {"max_backoff_ms", 20}}}}}});
  const std::string run = Open("token-a");
  Reply block = Tool("token-a", run, "block", "block_ip", {{"ip", "198.51.100.8"}});
  ASSERT_EQ(block.body["status"], "COMMITTED") << block.raw;
  downstream_.Fault({{"path", "/accounts/disable"}, {"action", "refuse"}, {"times", 10}});
  Reply disable = Tool("token-a", run, "disable", "disable_account", {{"user", "bob"}});
  ASSERT_EQ(disable.status, 200) << disable.raw;
  EXPECT_EQ(disable.body["status"], "FAILED") << disable.raw;
  EXPECT_EQ(disable.body["run_status"], "OPEN") << disable.raw;
  EXPECT_EQ(sagad_->Get("/v1/instances/" + run).body["calls"][0]["status"], "COMMITTED");
  EXPECT_EQ(downstream_.RouteCount("unblock_ip"), 0);
}

// Seen failing on main 4372162: agent B appended, read, aborted and
// finished A's run, got A's run back under A's key, and took over A's MCP
// session.
TEST_F(TenancyTest, ARunBelongsToItsAgentAndIsInvisibleToAnother) {
  Start();
  const std::string run = Open("token-a", "same-key");
  ASSERT_EQ(Tool("token-a", run, "block", "block_ip", {{"ip", "198.51.100.9"}}).body["status"],
            "COMMITTED");
  const std::string path = "/v1/instances/" + run;
  for (const auto& [method, p] :
       std::vector<std::pair<std::string, std::string>>{{"GET", path},
                                                        {"GET", path + "?wait=1"},
                                                        {"GET", path + "/events"},
                                                        {"GET", path + "/bundle"},
                                                        {"POST", path + "/finish"},
                                                        {"POST", path + "/abort"}}) {
    Reply r = Call("token-b", method, p, method == "POST" ? nlohmann::json::object() : nullptr);
    EXPECT_EQ(r.status, 404) << method << " " << p << ": " << r.raw;
  }
  Reply theirs = Tool("token-b", run, "ceo", "disable_account", {{"user", "ceo"}});
  EXPECT_EQ(theirs.status, 404) << theirs.raw;
  EXPECT_EQ(downstream_.RouteCount("disable_account"), 0);
  // B lists only its own; A sees its run.
  EXPECT_EQ(Call("token-b", "GET", "/v1/instances").body["instances"].size(), 0u);
  EXPECT_EQ(Call("token-b", "GET", "/v1/instances?owner=agent-a").body["instances"].size(), 0u);
  EXPECT_EQ(Call("token-a", "GET", "/v1/instances").body["instances"].size(), 1u);
  // B's own key space: the same key opens B's own run.
  const std::string b_run = Open("token-b", "same-key");
  EXPECT_NE(b_run, run);
  EXPECT_EQ(Open("token-a", "same-key"), run);
  // Operators see and act on all; the owner is named.
  Reply op = sagad_->Get(path);
  ASSERT_EQ(op.status, 200) << op.raw;
  EXPECT_EQ(op.body["owner"], "agent-a");
  EXPECT_EQ(op.body["calls"][0]["by"], "agent-a");
  EXPECT_EQ(sagad_->Get("/v1/instances?owner=agent-b").body["instances"].size(), 1u);
  // A's MCP session is not B's.
  Reply mcp =
      Call("token-b", "POST", "/mcp", {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"}},
           {{"Mcp-Session-Id", run}, {"Accept", "application/json, text/event-stream"}});
  EXPECT_EQ(mcp.status, 404) << mcp.raw;
  Reply resume = Call("token-b", "POST", "/mcp?run=" + run,
                      {{"jsonrpc", "2.0"},
                       {"id", 1},
                       {"method", "initialize"},
                       {"params", {{"protocolVersion", "2025-06-18"}, {"capabilities", {}}}}});
  EXPECT_EQ(resume.status, 404) << resume.raw;
  Reply own =
      Call("token-a", "POST", "/mcp", {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"}},
           {{"Mcp-Session-Id", run}});
  EXPECT_EQ(own.status, 200) << own.raw;
}

TEST_F(TenancyTest, EveryEventSaysWhoMadeItHappen) {
  Start();
  const std::string run = Open("token-a");
  ASSERT_EQ(Tool("token-a", run, "block", "block_ip", {{"ip", "198.51.100.10"}}).body["status"],
            "COMMITTED");
  Reply events = sagad_->Get("/v1/instances/" + run + "/events");
  ASSERT_EQ(events.status, 200) << events.raw;
  bool created = false, appended = false;
  for (const auto& e : events.body["events"]) {
    ASSERT_TRUE(e.contains("by")) << e.dump();
    if (e["type"] == "instance_created") created = e["by"] == "agent-a";
    if (e["type"] == "call_appended") appended = e["by"] == "agent-a";
    if (e["type"] == "started") {
      EXPECT_EQ(e["by"], "sagad");
    }
  }
  EXPECT_TRUE(created) << events.raw;
  EXPECT_TRUE(appended) << events.raw;
  // sagactl show prints who opened the run and each call's tool, arguments
  // and maker.
  Subprocess show({SAGACTL_BIN, "show", run},
                  {{"SAGAD_URL", "http://127.0.0.1:" + std::to_string(sagad_->port())},
                   {"SAGAD_TOKEN", "operator-token"}});
  const std::string out = show.ReadOutput();
  EXPECT_EQ(show.Wait(), 0) << out;
  for (const char* want : {"owner      agent-a", "block_ip", "198.51.100.10", "COMMITTED"})
    EXPECT_NE(out.find(want), std::string::npos) << want << " in:\n" << out;
}

// Seen failing on main 4372162: 1,000 call_ids grew /metrics by 2.3 MB, and
// /metrics answered without a token.
TEST_F(TenancyTest, MetricsCountCallsByToolNeverByCallIdAndNeedAToken) {
  Start(nlohmann::json::object(), {{"metrics_token", "scrape-secret"}});
  const std::string run = Open("token-a");
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(Tool("token-a", run, "call-id-" + std::to_string(i) + "-zq", "block_ip",
                   {{"ip", "198.51.100." + std::to_string(i)}})
                  .body["status"],
              "COMMITTED");
  EXPECT_EQ(Http(sagad_->port(), "GET", "/metrics").status, 401);
  Reply scrape =
      Http(sagad_->port(), "GET", "/metrics", "", {{"Authorization", "Bearer scrape-secret"}});
  ASSERT_EQ(scrape.status, 200);
  EXPECT_EQ(scrape.raw.find("call-id-"), std::string::npos);
  EXPECT_EQ(scrape.raw.find(run), std::string::npos);
  EXPECT_NE(scrape.raw.find("sagad_tool_calls_total{toolbox=\"soc_tools\",tool=\"block_ip\""),
            std::string::npos);
  EXPECT_EQ(Http(sagad_->port(), "GET", "/metrics", "", As("token-b")).status, 200);
}

TEST_F(TenancyTest, WhatARunKeepsAndHowManyOneAgentOpensAreBounded) {
  Start(nlohmann::json::object(), {{"max_open_runs", 2}});
  std::string big(17 * 1024, 'x');
  Reply fat = Call("token-a", "POST", "/v1/toolboxes/soc_tools/runs",
                   {{"input", {{"incident", "INC-1"}}}, {"metadata", {{"notes", big}}}});
  EXPECT_EQ(fat.status, 413) << fat.raw.substr(0, 300);
  EXPECT_NE(fat.body.value("detail", "").find("metadata"), std::string::npos);
  const std::string run = Open("token-a", "k1");
  Reply wordy = Call("token-a", "POST", "/v1/instances/" + run + "/calls",
                     {{"call_id", "c1"},
                      {"tool", "block_ip"},
                      {"arguments", {{"ip", "198.51.100.1"}}},
                      {"reason", big}});
  EXPECT_EQ(wordy.status, 413) << wordy.raw.substr(0, 300);
  EXPECT_NE(wordy.body.value("detail", "").find("reason + evidence"), std::string::npos);
  Open("token-a");
  Reply third =
      Call("token-a", "POST", "/v1/toolboxes/soc_tools/runs", {{"input", {{"incident", "INC-1"}}}});
  EXPECT_EQ(third.status, 429) << third.raw;
  EXPECT_NE(third.body.value("detail", "").find("max_open_runs"), std::string::npos);
  EXPECT_EQ(Open("token-a", "k1"), run);  // a replay is not a new run
  Open("token-b");                        // another agent has its own bound
  ASSERT_EQ(Call("token-a", "POST", "/v1/instances/" + run + "/finish", {}).status, 200);
  Open("token-a");  // one finished: room for another
}

// Seen failing on main 4372162: a bulk approve by the run's id approved an
// irreversible call, and there was no approval bound to a digest.
TEST_F(TenancyTest, AnApprovalIsBoundToWhatTheOperatorSaw) {
  Start();
  const std::string run = Open("token-a");
  Reply mail =
      Tool("token-a", run, "mail", "notify_user", {{"to", "bob@example.com"}, {"body", "x"}});
  ASSERT_EQ(mail.body["status"], "AWAITING_APPROVAL") << mail.raw;
  Reply cards = sagad_->Get("/v1/approvals");
  ASSERT_EQ(cards.body["approvals"].size(), 1u) << cards.raw;
  const nlohmann::json card = cards.body["approvals"][0];
  ASSERT_TRUE(card["digest"].is_string()) << card.dump();
  EXPECT_EQ(card["irreversible"], true);
  // In bulk, by id or by filter: never an agent's call or an irreversible step.
  Reply by_id = sagad_->Post("/v1/instances/actions/approve", {{"ids", {run}}});
  ASSERT_EQ(by_id.status, 200) << by_id.raw;
  EXPECT_EQ(by_id.body["results"][0]["http_status"], 409) << by_id.raw;
  Reply by_filter =
      sagad_->Post("/v1/instances/actions/approve", {{"filter", {{"waiting", "approval"}}}});
  ASSERT_EQ(by_filter.status, 200) << by_filter.raw;
  EXPECT_EQ(by_filter.body["results"][0]["http_status"], 409) << by_filter.raw;
  EXPECT_EQ(sagad_->Get("/v1/instances/" + run).body["calls"][0]["status"], "AWAITING_APPROVAL");
  // Bound to a digest: another one is refused and listed back.
  Reply stale = sagad_->Post(
      "/v1/approvals/actions/approve",
      {{"approvals",
        {{{"instance_id", run}, {"step", "mail"}, {"digest", std::string(64, '0')}}}}});
  EXPECT_EQ(stale.status, 409) << stale.raw;
  EXPECT_EQ(stale.body["refused"].size(), 1u) << stale.raw;
  Reply seen = sagad_->Post(
      "/v1/approvals/actions/approve",
      {{"approvals", {{{"instance_id", run}, {"step", "mail"}, {"digest", card["digest"]}}}},
       {"comment", "read it"}});
  EXPECT_EQ(seen.status, 200) << seen.raw;
  nlohmann::json sent =
      Tool("token-a", run, "mail", "notify_user", {{"to", "bob@example.com"}, {"body", "x"}}).body;
  EXPECT_EQ(sent["status"], "COMMITTED") << sent.dump();
  EXPECT_EQ(sent["approval"]["by"], "alice");
}

// Seen failing on main 4372162: the call stayed PLANNED in the aborted run
// and its replay answered 202 PLANNED.
TEST_F(TenancyTest, ACallThatWillNeverBeSentEndsCancelled) {
  Start();
  const std::string run = Open("token-a");
  ASSERT_EQ(Tool("token-a", run, "mail", "notify_user", {{"to", "b@example.com"}, {"body", "x"}})
                .body["status"],
            "AWAITING_APPROVAL");
  Reply queued =
      Call("token-a", "POST", "/v1/instances/" + run + "/calls",
           {{"call_id", "block"}, {"tool", "block_ip"}, {"arguments", {{"ip", "1.2.3.4"}}}});
  ASSERT_EQ(queued.status, 202) << queued.raw;
  Reply aborted = Call("token-a", "POST", "/v1/instances/" + run + "/abort", {{"reason", "stop"}});
  ASSERT_EQ(aborted.status, 200) << aborted.raw;
  sagad_->WaitStatus(run, "COMPENSATED");
  Reply replay = Tool("token-a", run, "block", "block_ip", {{"ip", "1.2.3.4"}});
  EXPECT_EQ(replay.status, 200) << replay.raw;
  EXPECT_EQ(replay.body["status"], "CANCELLED") << replay.raw;
  EXPECT_EQ(downstream_.RouteCount("block_ip"), 0);
}

TEST_F(TenancyTest, SmallRefusals) {
  Start();
  const std::string run = Open("token-a");
  for (const char* w : {"inf", "0x10", "1e3", "nan", "-1", "1.2.3"})
    EXPECT_EQ(Call("token-a", "GET", "/v1/instances/" + run + "?wait=" + w).status, 400) << w;
  EXPECT_EQ(Call("token-a", "GET", "/v1/instances/" + run + "?wait=0.5").status, 200);
  ASSERT_EQ(Tool("token-a", run, "b1", "block_ip", {{"ip", "10.0.0.1"}}).body["status"],
            "COMMITTED");
  Reply other = Tool("token-a", run, "b1", "disable_account", {{"user", "x"}});
  EXPECT_EQ(other.status, 409) << other.raw;
  EXPECT_NE(other.body.value("detail", "").find("another tool"), std::string::npos) << other.raw;
  nlohmann::json toolbox = nlohmann::json::parse(
      Slurp(std::string(SAGAD_SOURCE_DIR) + "/examples/definitions/soc_tools.json"));
  toolbox["name"] = "bad_tools";
  toolbox["tools"][0]["arguments_schema"]["properties"]["call_id"] = {{"type", "string"}};
  Reply bad = Call("admin-token", "PUT", "/v1/toolboxes/bad_tools/versions/1", toolbox);
  EXPECT_GE(bad.status, 400) << bad.raw;
  EXPECT_NE(bad.body.value("detail", "").find("call_id"), std::string::npos) << bad.raw;
  Reply null_id =
      Call("token-a", "POST", "/mcp", {{"jsonrpc", "2.0"}, {"id", nullptr}, {"method", "ping"}},
           {{"Mcp-Session-Id", run}});
  EXPECT_EQ(null_id.status, 400) << null_id.raw;
}

TEST(TenancyConfigTest, ABaseUrlThatWouldSplitARequestIsRefusedByCheck) {
  TempDir dir;
  const std::string config = dir.path() + "/config.json";
  std::ofstream(config)
      << nlohmann::json{{"data_dir", dir.path() + "/data"},
                        {"services", {{"iam", {{"base_url", "http://127.0.0.1:9\r\nX-Evil: 1"}}}}}}
             .dump();
  const std::string err = dir.path() + "/stderr";
  Subprocess check({SAGAD_BIN, "check", "--config", config}, {}, err);
  EXPECT_EQ(check.Wait(), 2);
  EXPECT_NE(Slurp(err).find("control byte"), std::string::npos) << Slurp(err);
}

// A tokenless sagad on loopback (the README's own example): a page that
// rebinds its name to 127.0.0.1 sends its own Host and Origin.
class RebindingTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_GT(sagad_.Start(), 0); }
  Reply Post(const std::string& path, const nlohmann::json& body,
             std::map<std::string, std::string> h) {
    h["Content-Type"] = "application/json";
    return Http(sagad_.port(), "POST", path, body.dump(), h);
  }
  TempDir dir_;
  Downstream downstream_;
  Coordinator sagad_{downstream_, dir_.path() + "/data"};
};

// Seen failing on main 4372162: every request below was served (a run
// opened, the mail service paused, whoami "admin").
TEST_F(RebindingTest, AForeignHostOrOriginIsRefusedWithoutTokens) {
  const std::string local = "127.0.0.1:" + std::to_string(sagad_.port());
  Reply host = Post("/v1/toolboxes/soc_tools/runs", {{"input", {{"incident", "x"}}}},
                    {{"Host", "evil.example:" + std::to_string(sagad_.port())}});
  EXPECT_EQ(host.status, 403) << host.raw;
  Reply origin = Post("/v1/services/mail/pause", nlohmann::json::object(),
                      {{"Host", local}, {"Origin", "http://evil.example"}});
  EXPECT_EQ(origin.status, 403) << origin.raw;
  EXPECT_EQ(Http(sagad_.port(), "GET", "/v1/whoami", "", {{"Host", "evil.example"}}).status, 403);
  Reply mcp = Post("/mcp?toolbox=soc_tools",
                   {{"jsonrpc", "2.0"},
                    {"id", 1},
                    {"method", "initialize"},
                    {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", {}}}}},
                   {{"Host", "evil.example.com"}, {"Origin", "http://evil.example.com"}});
  EXPECT_EQ(mcp.status, 403) << mcp.raw;
  const Reply services = sagad_.Get("/v1/services");
  for (const auto& s : services.body["services"])
    EXPECT_FALSE(s.value("paused", false)) << s.dump();
  // Probes answer whatever the Host; loopback names and pages are served.
  EXPECT_EQ(Http(sagad_.port(), "GET", "/healthz", "", {{"Host", "evil.example"}}).status, 200);
  for (const std::string& name :
       {local, std::string("localhost:") + std::to_string(sagad_.port()), std::string("[::1]")})
    EXPECT_EQ(Http(sagad_.port(), "GET", "/v1/whoami", "", {{"Host", name}}).status, 200) << name;
  Reply ok = Post("/mcp?toolbox=soc_tools&input.incident=x",
                  {{"jsonrpc", "2.0"},
                   {"id", 1},
                   {"method", "initialize"},
                   {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", {}}}}},
                  {{"Host", local}, {"Origin", "http://" + local}});
  EXPECT_EQ(ok.status, 200) << ok.raw;
}

}  // namespace
}  // namespace sagad::testing
