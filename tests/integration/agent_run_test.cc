// Agent runs over real HTTP against example-services (docs/agents.md): the
// soc_tools incident decided call by call from the last result, a re-sent
// call_id, abort before and after the irreversible e-mail, approval as an
// operator's act bound to the request, an agent that falls silent; and
// (recovery label) sagad killed at every persistence point of a call and of
// its undo, the agent asking again with the same call_id.
#include <gtest/gtest.h>

#include "adapters/sha256.h"
#include "tests/testing/agent.h"
#include "tests/testing/cluster.h"
#include "util/json_limits.h"

namespace sagad::testing {
namespace {

class AgentRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sagad_.UseToken("operator-token");
    ASSERT_GT(sagad_.Start(), 0);
  }
  TempDir dir_;
  Downstream downstream_;
  Coordinator sagad_{downstream_, dir_.path() + "/data", nlohmann::json::object(), kAgentTokens};
};

TEST_F(AgentRunTest, TheIncidentAgentDecidesEachCallFromTheLastResult) {
  Agent agent{sagad_};
  Reply opened = agent.Open();
  ASSERT_EQ(opened.status, 201) << opened.raw;
  EXPECT_EQ(opened.body["status"], "OPEN");
  EXPECT_EQ(opened.body["kind"], "run");
  EXPECT_EQ(opened.body["calls"].size(), 0u);

  Reply ticket =
      agent.Tool("ticket", "create_ticket",
                 {{"title", "Phishing"}, {"severity", "high"}, {"source_ip", "203.0.113.9"}});
  ASSERT_EQ(ticket.status, 200) << ticket.raw;
  ASSERT_EQ(ticket.body["status"], "COMMITTED") << ticket.raw;
  EXPECT_EQ(ticket.body["idempotency_key"], agent.run + ":ticket");
  // The agent decides from the answer: an external source is blocked.
  ASSERT_EQ(ticket.body["result"]["source"], "external");
  Reply block = agent.Tool("block", "block_ip", {{"ip", "203.0.113.9"}});
  ASSERT_EQ(block.body["status"], "COMMITTED") << block.raw;
  Reply disable = agent.Tool("disable", "disable_account", {{"user", "bob"}});
  ASSERT_EQ(disable.body["status"], "COMMITTED") << disable.raw;
  Reply mail = agent.Tool("mail", "notify_user", {{"to", "bob@example.com"}, {"body", "done"}});
  ASSERT_EQ(mail.status, 200) << mail.raw;
  ASSERT_EQ(mail.body["status"], "AWAITING_APPROVAL") << mail.raw;

  // The approval card: the tool, the rendered request and its digest, why.
  Reply approvals = sagad_.Get("/v1/approvals");
  ASSERT_EQ(approvals.body["approvals"].size(), 1u) << approvals.raw;
  const nlohmann::json card = approvals.body["approvals"][0];
  EXPECT_EQ(card["call"]["tool"], "notify_user");
  EXPECT_EQ(card["call"]["reason"], "incident INC-7");
  EXPECT_EQ(card["call"]["evidence"], nlohmann::json({"alert-42"}));
  EXPECT_EQ(card["call"]["model"], "m-1");
  EXPECT_EQ(card["metadata"]["agent"], "soc-bot");
  const nlohmann::json approved_body = card["request"]["body"];
  EXPECT_EQ(card["request"]["body_sha256"], Sha256Hex(CanonicalJson(approved_body)));

  // The agent's own token cannot approve; an operator can.
  Reply self = agent.Call("POST", "/v1/instances/" + agent.run + "/steps/mail/approve", {});
  EXPECT_EQ(self.status, 403) << self.raw;
  Reply ok = AsOperator(sagad_, "/v1/instances/" + agent.run + "/steps/mail/approve");
  ASSERT_EQ(ok.status, 200) << ok.raw;
  nlohmann::json view = sagad_.WaitStatus(agent.run, "OPEN");
  Reply sent = agent.Tool("mail", "notify_user", {{"to", "bob@example.com"}, {"body", "done"}});
  ASSERT_EQ(sent.body["status"], "COMMITTED") << sent.raw;
  EXPECT_EQ(sent.body["approval"]["by"], "alice");
  // What was sent is what was approved (the service echoes what it got).
  EXPECT_EQ(sent.body["result"]["to"], approved_body["to"]);
  EXPECT_EQ(sent.body["result"]["body"], approved_body["body"]);

  Reply finished = agent.Call("POST", "/v1/instances/" + agent.run + "/finish", {});
  ASSERT_EQ(finished.status, 200) << finished.raw;
  EXPECT_EQ(finished.body["status"], "COMPLETED");
  ASSERT_EQ(finished.body["calls"].size(), 4u);
  EXPECT_EQ(finished.body["calls"][0]["call_id"], "ticket");
  EXPECT_EQ(finished.body["calls"][0]["reason"], "incident INC-7");
  EXPECT_EQ(RepeatedEffects(downstream_), "");
  EXPECT_EQ(downstream_.Effects()["total"], 4);
  // Search finds runs by toolbox and by a field of their metadata.
  Reply found = sagad_.Get("/v1/instances?saga=soc_tools");
  EXPECT_EQ(found.body["instances"].size(), 1u) << found.raw;
  Reply by_agent = sagad_.Get("/v1/instances?metadata.agent=soc-bot");
  ASSERT_EQ(by_agent.body["instances"].size(), 1u) << by_agent.raw;
  EXPECT_EQ(by_agent.body["instances"][0]["id"], agent.run);
  EXPECT_EQ(sagad_.Get("/v1/instances?metadata.agent=other").body["instances"].size(), 0u);
  EXPECT_EQ(
      sagad_.Get("/v1/instances?metadata.model=m-1&status=COMPLETED").body["instances"].size(), 1u);
}

TEST_F(AgentRunTest, ACallIdSentAgainAnswersTheFirstOutcomeAndNeverASecondEffect) {
  Agent agent{sagad_};
  ASSERT_EQ(agent.Open("run-key-1").status, 201);
  Reply again = agent.Open("run-key-1");  // the agent's own retry of the open
  EXPECT_EQ(again.body["id"], agent.run) << again.raw;
  Reply first = agent.Tool("block", "block_ip", {{"ip", "198.51.100.1"}});
  ASSERT_EQ(first.body["status"], "COMMITTED") << first.raw;
  for (int i = 0; i < 3; ++i) {
    Reply same = agent.Tool("block", "block_ip", {{"ip", "198.51.100.1"}});
    EXPECT_EQ(same.status, 200) << same.raw;
    EXPECT_EQ(same.header("Idempotent-Replayed"), "true");
    EXPECT_EQ(same.body["result"], first.body["result"]);
  }
  Reply other = agent.Tool("block", "block_ip", {{"ip", "198.51.100.2"}});
  EXPECT_EQ(other.status, 409) << other.raw;
  EXPECT_EQ(downstream_.RouteCount("block_ip"), 1);
  // A call that cannot be made records nothing.
  Reply bad = agent.Tool("x1", "block_ip", {{"address", "1"}});
  EXPECT_EQ(bad.status, 422) << bad.raw;
  EXPECT_TRUE(bad.body["errors"].is_array()) << bad.raw;
  Reply unknown = agent.Tool("x2", "format_disk", nlohmann::json::object());
  EXPECT_EQ(unknown.status, 422) << unknown.raw;
  EXPECT_EQ(sagad_.Get("/v1/instances/" + agent.run).body["calls"].size(), 1u);
}

TEST_F(AgentRunTest, AbortBeforeTheMailUndoesInReverseAndAfterItIsRefusedNamingIt) {
  Agent agent{sagad_};
  ASSERT_EQ(agent.Open().status, 201);
  ASSERT_EQ(agent
                .Tool("ticket", "create_ticket",
                      {{"title", "t"}, {"severity", "low"}, {"source_ip", "203.0.113.9"}})
                .body["status"],
            "COMMITTED");
  ASSERT_EQ(agent.Tool("block", "block_ip", {{"ip", "203.0.113.9"}}).body["status"], "COMMITTED");
  ASSERT_EQ(agent.Tool("disable", "disable_account", {{"user", "eve"}}).body["status"],
            "COMMITTED");
  ASSERT_EQ(agent.Tool("mail", "notify_user", {{"to", "eve"}, {"body", "x"}}).body["status"],
            "AWAITING_APPROVAL");
  Reply aborted =
      agent.Call("POST", "/v1/instances/" + agent.run + "/abort", {{"reason", "false alarm"}});
  ASSERT_EQ(aborted.status, 200) << aborted.raw;
  nlohmann::json done = sagad_.WaitStatus(agent.run, "COMPENSATED");
  ASSERT_EQ(done["status"], "COMPENSATED") << done.dump();
  EXPECT_EQ(done["calls"][3]["status"], "REJECTED");
  // Undone last first: the account, the block, the ticket.
  std::vector<std::string> undone;
  for (const auto& e : Events(sagad_, agent.run))
    if (e["type"] == "compensated") undone.push_back(e["step"]);
  EXPECT_EQ(undone, (std::vector<std::string>{"disable", "block", "ticket"}));
  EXPECT_EQ(downstream_.Effects()["by_route"].value("send_message", 0), 0);

  Agent second{sagad_};
  ASSERT_EQ(second.Open().status, 201);
  ASSERT_EQ(second.Tool("block", "block_ip", {{"ip", "203.0.113.10"}}).body["status"], "COMMITTED");
  ASSERT_EQ(second.Tool("mail", "notify_user", {{"to", "eve"}, {"body", "x"}}).body["status"],
            "AWAITING_APPROVAL");
  ASSERT_EQ(AsOperator(sagad_, "/v1/instances/" + second.run + "/steps/mail/approve").status, 200);
  ASSERT_EQ(second.Tool("mail", "notify_user", {{"to", "eve"}, {"body", "x"}}).body["status"],
            "COMMITTED");
  Reply refused =
      second.Call("POST", "/v1/instances/" + second.run + "/abort", {{"reason", "too late"}});
  EXPECT_EQ(refused.status, 409) << refused.raw;
  EXPECT_NE(refused.body.value("detail", "").find("'mail'"), std::string::npos) << refused.raw;
  EXPECT_EQ(sagad_.Get("/v1/instances/" + second.run).body["status"], "OPEN");
}

TEST_F(AgentRunTest, ARunWhoseAgentFallsSilentGoesToReviewAndTheAgentsReturnResumesIt) {
  nlohmann::json tb = Http(sagad_.port(), "GET", "/v1/toolboxes/soc_tools/versions/1", "",
                           {{"Authorization", "Bearer operator-token"}})
                          .body;
  tb["idle_timeout_s"] = 1;
  tb.erase("name");
  tb.erase("version");
  Reply deployed =
      Http(sagad_.port(), "PUT", "/v1/toolboxes/soc_tools/versions/2", tb.dump(),
           {{"Authorization", "Bearer operator-token"}, {"Content-Type", "application/json"}});
  EXPECT_EQ(deployed.status, 403) << deployed.raw;  // deploying is an admin's act
  // The coordinator of this test has no admin token: deploy as a new one.
  sagad_.Kill();
  Coordinator admin(downstream_, dir_.path() + "/data2", nlohmann::json::object(),
                    {{{"name", "root"}, {"token", "admin-token"}, {"role", "admin"}}});
  admin.UseToken("admin-token");
  ASSERT_GT(admin.Start(), 0);
  deployed = Http(admin.port(), "PUT", "/v1/toolboxes/soc_tools/versions/2", tb.dump(),
                  {{"Authorization", "Bearer admin-token"}, {"Content-Type", "application/json"}});
  ASSERT_EQ(deployed.status, 201) << deployed.raw;
  Agent agent{admin, "admin-token"};
  ASSERT_EQ(agent.Open().status, 201);
  EXPECT_EQ(admin.Get("/v1/instances/" + agent.run).body["saga_version"], 2);
  ASSERT_EQ(agent.Tool("block", "block_ip", {{"ip", "203.0.113.11"}}).body["status"], "COMMITTED");
  nlohmann::json silent = admin.WaitStatus(agent.run, "NEEDS_REVIEW");
  ASSERT_EQ(silent["status"], "NEEDS_REVIEW") << silent.dump();
  EXPECT_EQ(silent["review_reason"], "agent silent");
  Reply back = agent.Tool("disable", "disable_account", {{"user", "mallory"}});
  EXPECT_EQ(back.body["status"], "COMMITTED") << back.raw;
  Reply finished = agent.Call("POST", "/v1/instances/" + agent.run + "/finish", {});
  EXPECT_EQ(finished.body["status"], "COMPLETED") << finished.raw;
}

// A gauge of sagad's /metrics (-1 if absent).
double Gauge(Coordinator& sagad, const std::string& name) {
  const std::string m =
      Http(sagad.port(), "GET", "/metrics", "", {{"Authorization", "Bearer operator-token"}}).raw;
  const size_t at = m.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(m.substr(at + name.size() + 2));
}

// A run that ends (finished, aborted) keeps nothing in sagad's memory: its
// idle-timeout wake-up (an hour by default) is called off with its timer,
// not left to fire for nothing an hour later.
TEST_F(AgentRunTest, AnEndedRunLeavesNoWakeUpBehind) {
  const int kRuns = 12;
  std::vector<Agent> agents(kRuns, Agent{sagad_});
  for (Agent& a : agents) ASSERT_EQ(a.Open().status, 201);
  ASSERT_EQ(agents[0].Tool("block", "block_ip", {{"ip", "203.0.113.12"}}).body["status"],
            "COMMITTED");
  // Each open run waits for its agent, with the idle timeout as deadline.
  EXPECT_TRUE(WaitFor([&] { return Gauge(sagad_, "sagad_wakeups_pending") >= kRuns; }))
      << Gauge(sagad_, "sagad_wakeups_pending");
  for (int i = 0; i < kRuns; ++i) {
    Agent& a = agents[static_cast<size_t>(i)];
    Reply r = a.Call("POST", "/v1/instances/" + a.run + (i % 2 ? "/abort" : "/finish"),
                     {{"reason", "done"}});
    ASSERT_LT(r.status, 300) << r.raw;
  }
  EXPECT_TRUE(WaitFor([&] {
    return Gauge(sagad_, "sagad_wakeups_pending") == 0 &&
           Gauge(sagad_, "sagad_timers_pending") == 0 &&
           Gauge(sagad_, "sagad_instances_cached") == 0;
  })) << "wake-ups "
      << Gauge(sagad_, "sagad_wakeups_pending") << ", timers "
      << Gauge(sagad_, "sagad_timers_pending") << ", cached "
      << Gauge(sagad_, "sagad_instances_cached");
}

}  // namespace
}  // namespace sagad::testing
