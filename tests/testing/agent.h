// An agent over real HTTP, for the tests of agent runs: a submitter's
// token, its run, its calls; and an operator's POST.
#pragma once

#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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
    std::map<std::string, std::string> h = {{"Content-Type", "application/json"}};
    if (!token.empty()) h["Authorization"] = "Bearer " + token;  // "": tokenless sagad
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

inline Reply AsOperator(Coordinator& sagad, const std::string& path,
                        const nlohmann::json& body = {}) {
  return Http(sagad.port(), "POST", path, body.is_null() ? "{}" : body.dump(),
              {{"Authorization", "Bearer operator-token"}, {"Content-Type", "application/json"}});
}

// A toolbox with a guard of each kind: block_ip twice per run; charge at
// most 100 per principal (then an operator decides); disable_account twice
// per principal in a day.
inline nlohmann::json GuardedToolbox() {
  auto any = [](std::initializer_list<std::pair<const char*, const char*>> props) {
    nlohmann::json p = nlohmann::json::object();
    for (auto [name, type] : props) p[name] = {{"type", type}};
    return nlohmann::json{{"type", "object"}, {"properties", p}};
  };
  return {{"kind", "toolbox"},
          {"name", "guarded"},
          {"version", 1},
          {"tools",
           {{{"name", "block_ip"},
             {"arguments_schema", any({{"ip", "string"}})},
             {"forward",
              {{"service", "edr"},
               {"method", "POST"},
               {"path", "/ips/block"},
               {"body", {{"ip", "{{args.ip}}"}}}}},
             {"compensation",
              {{"service", "edr"},
               {"method", "POST"},
               {"path", "/ips/unblock"},
               {"body", {{"ip", "{{args.ip}}"}}}}}},
            {{"name", "charge"},
             {"arguments_schema", any({{"amount", "number"}})},
             {"forward",
              {{"service", "payments"},
               {"method", "POST"},
               {"path", "/charges"},
               {"body", {{"amount", "{{args.amount}}"}, {"currency", "EUR"}, {"customer", "c"}}}}},
             {"compensation",
              {{"service", "payments"},
               {"method", "POST"},
               {"path", "/charges/{{result.ref}}/refund"}}}},
            {{"name", "disable_account"},
             {"arguments_schema", any({{"user", "string"}})},
             {"forward",
              {{"service", "iam"},
               {"method", "POST"},
               {"path", "/accounts/disable"},
               {"body", {{"user", "{{args.user}}"}}}}},
             {"compensation",
              {{"service", "iam"},
               {"method", "POST"},
               {"path", "/accounts/restore"},
               {"body", {{"user", "{{args.user}}"}}}}}}}},
          {"guards",
           {{{"tool", "block_ip"}, {"max_calls", 2}, {"per", "run"}},
            {{"name", "spend"},
             {"tool", "charge"},
             {"sum", "amount"},
             {"max", 100},
             {"per", "principal"},
             {"then", "approval"}},
            {{"tool", "disable_account"},
             {"max_calls", 2},
             {"per", "principal"},
             {"window_s", 86400}}}}};
}

// Every agent (each with its run open) calls disable_account at once: how
// many calls COMMITTED and how many were refused with 429.
inline std::pair<int, int> RaceForDisableAccount(std::vector<Agent>& agents) {
  std::vector<Reply> replies(agents.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < agents.size(); ++i)
    threads.emplace_back([&, i] {
      replies[i] = agents[i].Tool("d", "disable_account", {{"user", "u"}});
    });
  for (auto& t : threads) t.join();
  std::pair<int, int> out{0, 0};
  for (const auto& r : replies) {
    if (r.status == 200 && r.body["status"] == "COMMITTED") ++out.first;
    if (r.status == 429) ++out.second;
  }
  return out;
}

}  // namespace sagad::testing
