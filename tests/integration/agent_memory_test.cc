// Agents that wait and remember (docs/agents.md), over real HTTP against
// example-services: a wait until the operator decided, decisions recorded
// once and answered again, guards per run and per principal counting what
// is in flight, and the receipt an auditor checks offline with sagactl.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "tests/testing/agent.h"
#include "tests/testing/cluster.h"
#include "tests/testing/subprocess.h"

namespace sagad::testing {
namespace {

const nlohmann::json kTokens = {
    {{"name", "soc-agent"}, {"token", "agent-token"}, {"role", "submitter"}},
    {{"name", "other-agent"}, {"token", "other-token"}, {"role", "submitter"}},
    {{"name", "alice"}, {"token", "operator-token"}, {"role", "operator"}},
    {{"name", "root"}, {"token", "admin-token"}, {"role", "admin"}}};

class AgentMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sagad_.UseToken("operator-token");
    ASSERT_GT(sagad_.Start(), 0);
  }
  Reply Deploy(const nlohmann::json& toolbox) {
    return Http(sagad_.port(), "PUT",
                "/v1/toolboxes/" + toolbox["name"].get<std::string>() + "/versions/1",
                toolbox.dump(),
                {{"Authorization", "Bearer admin-token"}, {"Content-Type", "application/json"}});
  }
  Reply OpenGuarded(Agent& agent) {
    Reply r =
        agent.Call("POST", "/v1/toolboxes/guarded/runs", {{"input", nlohmann::json::object()}});
    if (r.body.is_object() && r.body.contains("id")) agent.run = r.body["id"];
    return r;
  }
  TempDir dir_;
  Downstream downstream_;
  Coordinator sagad_{downstream_, dir_.path() + "/data", nlohmann::json::object(), kTokens};
};

// ?wait=S&until=decided holds past AWAITING_APPROVAL and is answered when
// the operator decides; plain ?wait answers at AWAITING_APPROVAL.
TEST_F(AgentMemoryTest, AWaitUntilDecidedIsAnsweredWhenTheOperatorDecides) {
  Agent agent{sagad_};
  ASSERT_EQ(agent.Open().status, 201);
  const nlohmann::json mail = {{"call_id", "mail"},
                               {"tool", "notify_user"},
                               {"arguments", {{"to", "bob@example.com"}, {"body", "done"}}}};
  Reply settled = agent.Call("POST", "/v1/instances/" + agent.run + "/calls?wait=10", mail);
  ASSERT_EQ(settled.status, 200) << settled.raw;
  EXPECT_EQ(settled.body["status"], "AWAITING_APPROVAL");
  EXPECT_EQ(
      agent.Call("POST", "/v1/instances/" + agent.run + "/calls?wait=1&until=later", mail).status,
      400);

  std::atomic<bool> answered{false};
  Reply decided, run_decided;
  std::thread waiting([&] {
    decided =
        agent.Call("POST", "/v1/instances/" + agent.run + "/calls?wait=60&until=decided", mail);
    answered = true;
  });
  std::thread viewing([&] {
    run_decided = agent.Call("GET", "/v1/instances/" + agent.run + "?wait=60&until=decided",
                             nlohmann::json());
  });
  // Held while the call waits for the operator: the wait has not answered
  // 1.5 s later, and its holder is still connected.
  EXPECT_FALSE(WaitFor([&] { return answered.load(); }, std::chrono::milliseconds(1500)));
  ASSERT_EQ(AsOperator(sagad_, "/v1/instances/" + agent.run + "/steps/mail/approve").status, 200);
  waiting.join();
  viewing.join();
  ASSERT_EQ(decided.status, 200) << decided.raw;
  EXPECT_EQ(decided.body["status"], "COMMITTED") << decided.raw;
  EXPECT_EQ(decided.body["approval"]["by"], "alice");
  ASSERT_EQ(run_decided.status, 200) << run_decided.raw;
  EXPECT_EQ(run_decided.body["calls"][0]["status"], "COMMITTED") << run_decided.raw;

  // A wait until decided that runs out answers 200 with the call as it is.
  ASSERT_EQ(agent
                .Call("POST", "/v1/instances/" + agent.run + "/calls?wait=0.2&until=decided",
                      {{"call_id", "mail2"},
                       {"tool", "notify_user"},
                       {"arguments", {{"to", "eve@example.com"}, {"body", "x"}}}})
                .body["status"],
            "AWAITING_APPROVAL");
}

// A saga's view waited for until decided holds past its approval and is
// answered once the operator approved and the saga ended.
TEST_F(AgentMemoryTest, ASagaWaitedForUntilDecidedIsAnsweredWhenItEnds) {
  Reply submitted = sagad_.Submit("incident_response", IncidentInput(), 10);
  ASSERT_EQ(submitted.body["status"], "AWAITING_APPROVAL") << submitted.raw;
  const std::string id = submitted.body["id"];
  std::atomic<bool> answered{false};
  Reply ended;
  std::thread waiting([&] {
    ended = sagad_.Get("/v1/instances/" + id + "?wait=60&until=decided");
    answered = true;
  });
  EXPECT_FALSE(WaitFor([&] { return answered.load(); }, std::chrono::milliseconds(1000)));
  ASSERT_EQ(AsOperator(sagad_, "/v1/instances/" + id + "/steps/notify_user/approve").status, 200);
  waiting.join();
  EXPECT_EQ(ended.status, 200) << ended.raw;
  EXPECT_EQ(ended.body["status"], "COMPLETED") << ended.raw;
}

// The first decision under a decision_id is kept: asked again with
// another value it answers the stored one (Idempotent-Replayed), across a
// restart; decisions are in the run's view in order with the calls.
TEST_F(AgentMemoryTest, TheFirstDecisionIsKeptAndAnsweredAgainAfterARestart) {
  Agent agent{sagad_};
  ASSERT_EQ(agent.Open("INC-9").status, 201);
  const std::string path = "/v1/instances/" + agent.run + "/decisions";
  Reply first = agent.Call("POST", path,
                           {{"decision_id", "triage"},
                            {"value", {{"block", "203.0.113.9"}}},
                            {"model", "m-1"},
                            {"prompt_version", "p-3"}});
  ASSERT_EQ(first.status, 201) << first.raw;
  EXPECT_EQ(first.body["value"]["block"], "203.0.113.9");
  EXPECT_EQ(first.body["by"], "soc-agent");
  EXPECT_EQ(first.header("Idempotent-Replayed"), "");
  Reply call = agent.Tool("block-after-triage", "block_ip", {{"ip", "203.0.113.9"}});
  ASSERT_EQ(call.body["status"], "COMMITTED") << call.raw;

  sagad_.Kill();
  ASSERT_GT(sagad_.Start(), 0);
  // The model answers otherwise after the restart: the stored value wins.
  Reply again = agent.Call("POST", path, {{"decision_id", "triage"}, {"value", {{"block", "x"}}}});
  ASSERT_EQ(again.status, 200) << again.raw;
  EXPECT_EQ(again.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(again.body["value"]["block"], "203.0.113.9");
  EXPECT_EQ(again.body["model"], "m-1");

  Reply view = agent.Call("GET", "/v1/instances/" + agent.run, nlohmann::json());
  ASSERT_EQ(view.body["decisions"].size(), 1u) << view.raw;
  EXPECT_EQ(view.body["decisions"][0]["after_calls"], 0);  // before the call it led to
  Reply events = agent.Call("GET", "/v1/instances/" + agent.run + "/events", nlohmann::json());
  EXPECT_NE(events.raw.find("decision_recorded"), std::string::npos);

  // Malformed, too big, not the owner's, a saga: refused by name.
  EXPECT_EQ(agent.Call("POST", path, {{"decision_id", "a b"}, {"value", 1}}).status, 422);
  EXPECT_EQ(agent.Call("POST", path, {{"decision_id", "v"}}).status, 422);
  EXPECT_EQ(
      agent.Call("POST", path, {{"decision_id", "big"}, {"value", std::string(20000, 'x')}}).status,
      413);
  Agent other{sagad_, "other-token"};
  EXPECT_EQ(other.Call("POST", path, {{"decision_id", "mine"}, {"value", 1}}).status, 404);
  // A finished run answers its decisions, and takes no new one.
  ASSERT_EQ(agent.Call("POST", "/v1/instances/" + agent.run + "/finish", {}).status, 200);
  EXPECT_EQ(agent.Call("POST", path, {{"decision_id", "triage"}, {"value", 2}}).status, 200);
  EXPECT_EQ(agent.Call("POST", path, {{"decision_id", "late"}, {"value", 2}}).status, 409);
}

// A guard per run refuses the third block_ip of a run (429 naming it),
// never another run's; a guard per principal counts across the
// principal's runs and not another's; a sum over the guard asks an
// operator; refusals and holds are counted in /metrics.
TEST_F(AgentMemoryTest, GuardsPerRunAndPerPrincipalCountCallsInFlight) {
  Reply deployed = Deploy(GuardedToolbox());
  ASSERT_EQ(deployed.status, 201) << deployed.raw;
  Agent a{sagad_}, b{sagad_}, other{sagad_, "other-token"};
  ASSERT_EQ(OpenGuarded(a).status, 201);
  ASSERT_EQ(OpenGuarded(b).status, 201);
  ASSERT_EQ(OpenGuarded(other).status, 201);

  EXPECT_EQ(a.Tool("b1", "block_ip", {{"ip", "1"}}).body["status"], "COMMITTED");
  EXPECT_EQ(a.Tool("b2", "block_ip", {{"ip", "2"}}).body["status"], "COMMITTED");
  Reply third = a.Tool("b3", "block_ip", {{"ip", "3"}});
  EXPECT_EQ(third.status, 429) << third.raw;
  EXPECT_NE(third.body.value("detail", "").find("block_ip.max_calls.run"), std::string::npos)
      << third.raw;
  EXPECT_EQ(b.Tool("b1", "block_ip", {{"ip", "3"}}).body["status"], "COMMITTED");

  // Per principal: a's run and b's run together, never other's.
  EXPECT_EQ(a.Tool("d1", "disable_account", {{"user", "u1"}}).body["status"], "COMMITTED");
  EXPECT_EQ(b.Tool("d1", "disable_account", {{"user", "u2"}}).body["status"], "COMMITTED");
  Reply over = b.Tool("d2", "disable_account", {{"user", "u3"}});
  EXPECT_EQ(over.status, 429) << over.raw;
  EXPECT_EQ(other.Tool("d1", "disable_account", {{"user", "u4"}}).body["status"], "COMMITTED");

  // A sum over its max waits for an operator, named in the call and the card.
  EXPECT_EQ(a.Tool("c1", "charge", {{"amount", 60}}).body["status"], "COMMITTED");
  Reply held = b.Tool("c1", "charge", {{"amount", 50}});
  ASSERT_EQ(held.body["status"], "AWAITING_APPROVAL") << held.raw;
  EXPECT_EQ(held.body["guard"]["name"], "spend");
  Reply cards = sagad_.Get("/v1/approvals");
  EXPECT_NE(cards.raw.find("spend"), std::string::npos) << cards.raw;
  EXPECT_EQ(AsOperator(sagad_, "/v1/instances/" + b.run + "/steps/c1/approve").status, 200);
  EXPECT_EQ(b.Call("POST", "/v1/instances/" + b.run + "/calls?wait=10&until=decided",
                   {{"call_id", "c1"}, {"tool", "charge"}, {"arguments", {{"amount", 50}}}})
                .body["status"],
            "COMMITTED");
  // A summed argument that is not a number is refused by name.
  EXPECT_EQ(a.Tool("c2", "charge", {{"amount", "lots"}}).status, 422);

  // The guards hold across a restart (they count what is stored).
  sagad_.Kill();
  ASSERT_GT(sagad_.Start(), 0);
  EXPECT_EQ(a.Tool("b4", "block_ip", {{"ip", "4"}}).status, 429);
  EXPECT_EQ(a.Tool("d3", "disable_account", {{"user", "u5"}}).status, 429);
  const std::string metrics = sagad_.Get("/metrics").raw;
  EXPECT_NE(metrics.find("sagad_guard_verdicts_total{toolbox=\"guarded\",guard=\"block_ip.max_"
                         "calls.run\",verdict=\"refused\"}"),
            std::string::npos);

  // A toolbox whose guard names no tool, or mixes count and sum, is refused.
  nlohmann::json bad = GuardedToolbox();
  bad["name"] = "bad";
  bad["guards"] = {{{"tool", "nope"}, {"max_calls", 1}}};
  Reply refused = Deploy(bad);
  EXPECT_EQ(refused.status, 400) << refused.raw;
  EXPECT_NE(refused.raw.find("guards[0].tool"), std::string::npos) << refused.raw;
  bad["guards"] = {{{"tool", "charge"}, {"max_calls", 1}, {"sum", "amount"}, {"max", 1}}};
  EXPECT_EQ(Deploy(bad).status, 400);
}

// Two calls of one principal racing for the last unit of a guard: exactly
// one passes.
TEST_F(AgentMemoryTest, CallsRacingForTheLastUnitOfAGuardNeverBothPass) {
  Reply deployed = Deploy(GuardedToolbox());
  ASSERT_EQ(deployed.status, 201) << deployed.raw;
  std::vector<Agent> agents(6, Agent{sagad_});
  for (auto& a : agents) ASSERT_EQ(OpenGuarded(a).status, 201);
  auto [passed, refused] = RaceForDisableAccount(agents);
  EXPECT_EQ(passed, 2);
  EXPECT_EQ(refused, 4);
}

// The receipt chains the opening, decisions, calls and the operator's
// approval (who, digest, version, rule); sagactl verify-receipt checks it,
// and finds a changed byte.
TEST_F(AgentMemoryTest, TheReceiptIsAHashChainAndSagactlFindsTampering) {
  Agent agent{sagad_};
  ASSERT_EQ(agent.Open().status, 201);
  ASSERT_EQ(agent
                .Call("POST", "/v1/instances/" + agent.run + "/decisions",
                      {{"decision_id", "plan"}, {"value", "mail bob"}})
                .status,
            201);
  ASSERT_EQ(agent.Tool("mail", "notify_user", {{"to", "bob@example.com"}, {"body", "done"}})
                .body["status"],
            "AWAITING_APPROVAL");
  ASSERT_EQ(AsOperator(sagad_, "/v1/instances/" + agent.run + "/steps/mail/approve").status, 200);
  // Until the approved call is no longer under way (the run is OPEN all along).
  Reply decided =
      agent.Call("GET", "/v1/instances/" + agent.run + "?wait=20&until=decided", nlohmann::json());
  ASSERT_EQ(decided.body["calls"][0]["status"], "COMMITTED") << decided.raw;
  Reply receipt = agent.Call("GET", "/v1/instances/" + agent.run + "/receipt", nlohmann::json());
  ASSERT_EQ(receipt.status, 200) << receipt.raw;
  std::vector<std::string> types;
  nlohmann::json approval;
  for (const auto& e : receipt.body["entries"]) {
    types.push_back(e["type"]);
    if (e["type"] == "approved") approval = e;
  }
  const std::vector<std::string> want = {"opened",   "decision", "call", "approval_requested",
                                         "approved", "committed"};
  EXPECT_EQ(types, want) << receipt.raw;
  EXPECT_EQ(approval["by"], "alice");
  EXPECT_EQ(approval["rule"], "irreversible");
  EXPECT_EQ(approval["version"], 1);
  EXPECT_EQ(approval["digest"].get<std::string>().size(), 64u);
  Agent other{sagad_, "other-token"};
  EXPECT_EQ(other.Call("GET", "/v1/instances/" + agent.run + "/receipt", nlohmann::json()).status,
            404);

  const std::string file = dir_.path() + "/receipt.json";
  std::ofstream(file) << receipt.raw;
  auto verify = [&](const std::string& f) {
    const std::string err = f + ".err";
    Subprocess p({SAGACTL_BIN, "verify-receipt", f}, {}, err);
    std::pair<int, std::string> out;
    out.second = p.ReadOutput();
    out.first = p.Wait();
    std::ifstream e(err);
    out.second += std::string(std::istreambuf_iterator<char>(e), {});
    return out;
  };
  auto [ok, ok_text] = verify(file);
  EXPECT_EQ(ok, 0) << ok_text;
  EXPECT_NE(ok_text.find("6 entries"), std::string::npos) << ok_text;
  // One byte of the approved digest changed: found.
  std::string text = receipt.raw;
  const std::string digest = approval["digest"];
  text.replace(text.find(digest), 1, digest[0] == 'a' ? "b" : "a");
  std::ofstream(dir_.path() + "/tampered.json") << text;
  auto [bad, bad_text] = verify(dir_.path() + "/tampered.json");
  EXPECT_EQ(bad, 1) << bad_text;
  EXPECT_NE(bad_text.find("entry 4"), std::string::npos) << bad_text;
}

}  // namespace
}  // namespace sagad::testing
