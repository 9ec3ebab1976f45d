#include "coordinator/sim/agents.h"

#include <cstdio>

#include "adapters/trace_context.h"
#include "coordinator/store/memory/memory_store.h"
#include "util/check.h"

namespace sagad::sim {
namespace {

constexpr int kMaxTries = 300;  // requests of one step before an agent gives up

// A stable draw for (key, n): the same call is the same every time it is sent.
uint64_t Mix(const std::string& key, int n) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : key + "#" + std::to_string(n))
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

}  // namespace

ToolboxDefinition SimTools() {
  const nlohmann::json args = {{"type", "object"},
                               {"required", {"order"}},
                               {"properties", {{"order", {{"type", "string"}}}}}};
  const nlohmann::json body = {{"order", "{{args.order}}"}};
  auto tb = ToolboxBuilder("sim_tools", 1)
                .IdleTimeout(20, "review")
                .MaxCalls(16)
                .Tool("op", "", args)
                .Call("alpha", "POST", "/ops", body)
                .Compensate("alpha", "POST", "/ops/{{result.ref}}/undo")
                .Tool("op2", "", args)
                .Call("beta", "POST", "/ops", body)
                .Compensate("beta", "POST", "/ops/{{result.ref}}/undo")
                .Tool("gated", "", args)
                .Call("gamma", "POST", "/ops", body)
                .Compensate("gamma", "POST", "/ops/{{result.ref}}/undo")
                .RequiresApproval()
                .Tool("pivot", "", args)
                .Call("delta", "POST", "/pivot", body)
                .Irreversible()
                // A guard of each kind: op2 once a run; gated three times
                // across every run of the principal (all the seed's agents).
                .Guard({{"tool", "op2"}, {"max_calls", 1}, {"per", "run"}})
                .Guard({{"tool", "gated"}, {"max_calls", 3}, {"per", "principal"}})
                .Build();
  SAGAD_CHECK(tb.ok()) << tb.status().ToString();
  return *tb;
}

void Agents::Plan(int64_t busy_ms) {
  const int64_t start = world_.now();
  if (agents_ > 0) client_ = std::make_unique<ApiClient>(world_);
  for (int n = 0; n < agents_; ++n) {
    Agent g;
    g.key = "agent-" + std::to_string(n);
    g.calls = 1 + static_cast<int>(r_.Below(4));
    const uint64_t end = r_.Below(10);
    g.end = end < 6 ? End::kFinish : end < 9 ? End::kAbort : End::kSilent;
    keys_.insert(g.key);
    all_.push_back(g);
    const int64_t at = start + static_cast<int64_t>(r_.Below(busy_ms / 2));
    world_.At(at, [this, n] { Step(static_cast<size_t>(n)); });
  }
}

bool Agents::Done() const {
  for (const Agent& g : all_)
    if (!g.done) return false;
  return true;
}

// As World::AnyLive, from the agents' own draws: a process that is up, not
// paused and not inside a store or downstream call of its own.
Process* Agents::Live() {
  std::vector<Process*> live;
  for (auto& p : world_.processes())
    if (p.alive && p.engine && !p.inside_call && p.paused_until <= world_.now()) live.push_back(&p);
  return live.empty() ? nullptr : live[r_.Below(live.size())];
}

void Agents::Later(size_t a, int64_t min_ms, int64_t max_ms) {
  Agent& g = all_[a];
  if (++g.tries > kMaxTries) {  // the agent gives up: its run goes idle, then to review
    SIM_TRACE(world_, g.key + " gives up");
    g.done = true;
    return;
  }
  world_.At(world_.now() + min_ms + static_cast<int64_t>(r_.Below(max_ms - min_ms)),
            [this, a] { Step(a); });
}

// An operator, now and then, on the call of this run that waits for one:
// approves it, or (one time in four) rejects it.
void Agents::Operate(const Agent& g) {
  if (g.run.empty() || world_.quiet() || !r_.Chance(0.3)) return;
  Process* p = Live();
  if (!p) return;
  auto view = MemoryStore(world_.data()).GetInstance(g.run);
  if (!view.ok()) return;
  for (const auto& c : view->value("calls", nlohmann::json::array())) {
    if (c.value("status", "") != "AWAITING_APPROVAL") continue;
    const std::string target = "/v1/instances/" + g.run + "/steps/" + c.value("call_id", "") +
                               (r_.Chance(0.75) ? "/approve" : "/reject");
    client_->Send(*p, "POST", target, {}, {{"comment", "sim"}}, 0,
                  [this, target](const ApiClient::Answer& a) {
                    SIM_TRACE(world_, "operator " + target + ": " + std::to_string(a.status));
                  });
    return;
  }
}

void Agents::Step(size_t a) {
  Agent& g = all_[a];
  Operate(g);
  if (g.done) return;
  if (g.run.empty()) return Open(a);
  if (g.next < g.calls) return g.decided.count(g.next) ? Call(a) : Decide(a);
  if (g.end == End::kSilent) {  // its run must go to review by itself
    g.done = true;
    return;
  }
  Finish(a);
}

void Agents::Open(size_t a) {
  Agent& g = all_[a];
  Process* p = Live();
  if (!p) return Later(a, 200, 2000);
  // A traceparent of the seed's own (one drawn by sagad would not replay).
  char parent[64];
  snprintf(parent, sizeof parent, "00-%016llx%016llx-%016llx-01",
           static_cast<unsigned long long>(Mix(g.key, 0) | 1), 0x6167656eULL,
           static_cast<unsigned long long>(Mix(g.key, 1) | 1));
  client_->Send(*p, "POST", "/v1/toolboxes/sim_tools/runs",
                {{"Idempotency-Key", g.key}, {"traceparent", parent}},
                {{"input", {{"order", g.key}}}, {"metadata", {{"agent", g.key}}}}, 0,
                [this, a](const ApiClient::Answer& out) { Opened(a, out); });
}

void Agents::Opened(size_t a, const ApiClient::Answer& out) {
  Agent& g = all_[a];
  if (out.status == 400 || out.status == 404 || out.status == 422)
    world_.Violation("run of " + g.key + " refused: " + out.body.dump());
  const std::string id = out.body.is_object() ? out.body.value("id", "") : "";
  if ((out.status != 200 && out.status != 201) || id.empty()) return Later(a, 200, 2000);
  if (!g.run.empty() && g.run != id)
    world_.Violation("key " + g.key + " opened two runs: " + g.run + ", " + id);
  g.run = id;
  g.tries = 0;
  SIM_TRACE(world_, g.key + " opened " + g.run);
  Later(a, 100, 1500);
}

// The agent's "model": which tool its n-th call uses. Asked again (after
// a crash) it may answer otherwise: a fresh draw each time.
nlohmann::json Agents::Model(const Agent& g, int n) {
  static const char* const kTools[] = {"op",  "op",    "op",    "op",    "op2",
                                       "op2", "gated", "gated", "pivot", "op"};
  return {{"tool", kTools[r_.Below(10)]}, {"order", g.key + "-" + std::to_string(n)}};
}

// The n-th call: what the recorded decision says, named after it.
nlohmann::json Agents::CallOf(const Agent& g, int n) {
  const nlohmann::json& d = g.decided.at(n);
  return {{"call_id", "c" + std::to_string(n)},
          {"tool", d.value("tool", "op")},
          {"arguments", {{"order", d.value("order", "")}}}};
}

// Records the model's choice for the next call before acting on it. The
// first value recorded answers every later ask, whatever the model says
// now: an answer that differs from one seen before is a violation.
void Agents::Decide(size_t a) {
  Agent& g = all_[a];
  Process* p = Live();
  if (!p) return Later(a, 200, 2000);
  const int n = g.next;
  const nlohmann::json body = {{"decision_id", "d" + std::to_string(n)}, {"value", Model(g, n)}};
  client_->Send(*p, "POST", "/v1/instances/" + g.run + "/decisions", {}, body, 0,
                [this, a, n](const ApiClient::Answer& out) {
                  Agent& g = all_[a];
                  if (out.status != 200 && out.status != 201) {
                    if (out.status == 400 || out.status == 422 || out.status == 404)
                      world_.Violation(g.key + ": decision refused: " + out.body.dump());
                    return Later(a, 200, 2000);
                  }
                  const nlohmann::json value = out.body.value("value", nlohmann::json());
                  SIM_TRACE(world_, g.key + " decided d" + std::to_string(n) + " = " +
                                        value.dump() + ": " + std::to_string(out.status));
                  auto [seen, first] = g.answered.emplace(n, value);
                  if (!first && seen->second != value)
                    world_.Violation(g.key + ": decision d" + std::to_string(n) + " was " +
                                     seen->second.dump() + ", now " + value.dump());
                  // Now and then the agent "crashes" between its decision
                  // and its call: it asks again (its model would answer
                  // otherwise) before it calls.
                  if (r_.Chance(0.2)) return Later(a, 100, 2000);
                  g.decided[n] = value;
                  Later(a, 50, 500);
                });
}

void Agents::Call(size_t a) {
  Agent& g = all_[a];
  Process* p = Live();
  if (!p) return Later(a, 200, 2000);
  const std::string target = "/v1/instances/" + g.run + "/calls";
  // Now and then a call its tool's schema refuses: nothing may be recorded.
  if (Mix(g.key, 100 + g.next) % 20 == 0 && g.tries == 0) {
    nlohmann::json bad = {
        {"call_id", "bad" + std::to_string(g.next)}, {"tool", "op"}, {"arguments", {{"order", 7}}}};
    client_->Send(*p, "POST", target, {}, bad, 0, [this, key = g.key](const ApiClient::Answer& r) {
      if (r.status >= 200 && r.status < 300)
        world_.Violation(key + ": a call its schema refuses was recorded");
    });
  }
  const nlohmann::json call = CallOf(g, g.next);
  // Sometimes waiting for the call to settle (?wait), as a client may, or
  // to be decided (past an operator's approval).
  const bool wait = r_.Chance(0.3);
  const bool decided = wait && r_.Chance(0.5);
  client_->Send(*p, "POST",
                target + (decided ? "?wait=5&until=decided"
                          : wait  ? "?wait=5"
                                  : ""),
                {}, call, wait ? 5 : 0,
                [this, a, call](const ApiClient::Answer& out) { Called(a, call, out); });
}

void Agents::Called(size_t a, const nlohmann::json& call, const ApiClient::Answer& out) {
  Agent& g = all_[a];
  const bool ok = out.status == 200 || out.status == 202;
  SIM_TRACE(world_, g.key + " calls " + call.dump() + ": " + std::to_string(out.status) +
                        (out.Header("idempotent-replayed") == "true" ? " (answered again)" : "") +
                        (ok ? "" : " " + out.body.value("detail", "")));
  if (!ok) {
    // Refused arguments, or a call_id taken by another call: never right here.
    const std::string detail = out.body.is_object() ? out.body.value("detail", "") : "";
    if (out.status == 422 || out.status == 400 ||
        (out.status == 409 && detail.find("new call_id") != std::string::npos))
      world_.Violation(g.key + ": call " + call.dump() + " refused: " + out.body.dump());
    if (out.status == 429 && detail.find("guard") != std::string::npos) {
      ++g.next;  // over a guard: nothing recorded; the agent goes on without it
      g.tries = 0;
    }
    return Later(a, 200, 3000);
  }
  // Recorded. Now and then the agent "crashes" before it learns so, and
  // sends the same call again later.
  if (r_.Chance(0.2)) return Later(a, 100, 4000);
  ++g.next;
  g.tries = 0;
  Later(a, 100, 2500);
}

void Agents::Finish(size_t a) {
  Agent& g = all_[a];
  Process* p = Live();
  if (!p) return Later(a, 300, 3000);
  const bool abort = g.end == End::kAbort;
  client_->Send(*p, "POST", "/v1/instances/" + g.run + (abort ? "/abort" : "/finish"), {},
                abort ? nlohmann::json{{"reason", "the agent gives up"}} : nlohmann::json::object(),
                0, [this, a](const ApiClient::Answer& out) { Ended(a, out); });
}

void Agents::Ended(size_t a, const ApiClient::Answer& out) {
  Agent& g = all_[a];
  const std::string detail = out.body.is_object() ? out.body.value("detail", "") : "";
  SIM_TRACE(world_, g.key + (g.end == End::kAbort ? " aborts: " : " finishes: ") +
                        std::to_string(out.status) + " " + detail);
  if (out.status == 200) {
    g.done = true;
    return;
  }
  // Abort is refused once an irreversible call is in play: finish instead.
  if (g.end == End::kAbort && detail.find("irreversible") != std::string::npos)
    g.end = End::kFinish;
  Later(a, 300, 3000);
}

}  // namespace sagad::sim
