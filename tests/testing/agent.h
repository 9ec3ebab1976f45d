// An agent over real HTTP, for the tests of agent runs: a submitter's
// token, its run, its calls; and an operator's POST.
#pragma once

#include <map>
#include <string>

#include "tests/testing/cluster.h"

namespace sagad::testing {

inline const nlohmann::json kAgentTokens = {
    {{"name", "soc-agent"}, {"token", "agent-token"}, {"role", "submitter"}},
    {{"name", "alice"}, {"token", "operator-token"}, {"role", "operator"}}};

// An agent: a submitter's token, its run, its calls.
struct Agent {
  explicit Agent(Coordinator& c, std::string t = "agent-token") : sagad(c), token(std::move(t)) {}
  Coordinator& sagad;
  std::string token;
  std::string run;

  Reply Call(const std::string& method, const std::string& path, const nlohmann::json& body,
             const std::map<std::string, std::string>& extra = {}) {
    std::map<std::string, std::string> h = {{"Authorization", "Bearer " + token},
                                            {"Content-Type", "application/json"}};
    h.insert(extra.begin(), extra.end());
    return Http(sagad.port(), method, path, body.is_null() ? "" : body.dump(), h);
  }
  Reply Open(const std::string& key = "") {
    Reply r = Call("POST", "/v1/toolboxes/soc_tools/runs",
                   {{"input", {{"incident", "INC-7"}}},
                    {"metadata", {{"agent", "soc-bot"}, {"model", "m-1"}}}},
                   key.empty() ? std::map<std::string, std::string>{}
                               : std::map<std::string, std::string>{{"Idempotency-Key", key}});
    if (r.body.is_object() && r.body.contains("id")) run = r.body["id"];
    return r;
  }
  Reply Tool(const std::string& call_id, const std::string& tool, const nlohmann::json& args,
             double wait = 10) {
    return Call("POST", "/v1/instances/" + run + "/calls?wait=" + std::to_string(wait),
                {{"call_id", call_id},
                 {"tool", tool},
                 {"arguments", args},
                 {"reason", "incident INC-7"},
                 {"evidence", {"alert-42"}},
                 {"model", "m-1"}});
  }
};

inline Reply AsOperator(Coordinator& sagad, const std::string& path, const nlohmann::json& body = {}) {
  return Http(sagad.port(), "POST", path, body.is_null() ? "{}" : body.dump(),
              {{"Authorization", "Bearer operator-token"}, {"Content-Type", "application/json"}});
}

}  // namespace sagad::testing
