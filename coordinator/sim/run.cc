#include "coordinator/sim/run.h"

#include <regex>
#include <set>

#include "coordinator/sim/agents.h"
#include "coordinator/sim/invariants.h"
#include "coordinator/sim/workload.h"
#include "coordinator/sim/world.h"
#include "examples/examples.h"
#include "util/log.h"

namespace sagad::sim {
namespace {

constexpr int64_t kBusyMs = 60'000;      // faults, crashes, clients, operators
constexpr int64_t kQuietMs = 1'800'000;  // then at most this long without faults

Scenario DrawScenario(SeededRandom& r) {
  Scenario s;
  s.coordinators = r.Chance(0.4) ? 2 : 1;
  s.lease_ms = 1000 + static_cast<int64_t>(r.Below(4)) * 1000;
  s.crashes = r.Chance(0.7);
  s.pauses = s.coordinators == 2 && r.Chance(0.5);
  auto rate = [&r](double max) { return r.Chance(0.5) ? r.NextDouble() * max : 0.0; };
  s.faults.lost_before = rate(0.1);
  s.faults.lost_after = rate(0.1);
  s.faults.too_many = rate(0.1);
  s.faults.refused_conn = rate(0.05);
  s.faults.delayed = rate(0.05);
  s.faults.pause = s.pauses ? rate(0.05) : 0;
  s.faults.unclear_answer = rate(0.3);
  s.faults.refusals = rate(0.3);
  s.store_faults.fail = rate(0.05);
  s.store_faults.fail_after = rate(0.05);
  s.store_faults.slow = s.pauses ? rate(0.02) : 0;
  s.store_faults.crash_before = s.crashes ? rate(0.01) : 0;
  s.store_faults.crash_after = s.crashes ? rate(0.01) : 0;
  return s;
}

// True when every instance is COMPLETED, COMPENSATED or NEEDS_REVIEW.
bool AllSettled(World& w) {
  auto active = MemoryStore(w.data()).ListActive();
  if (!active.ok()) return false;
  for (const auto& a : *active)
    if (a.status != "NEEDS_REVIEW") return false;
  return true;
}

}  // namespace

namespace {

SeedResult RunOnce(uint64_t seed, const RunOptions& options, bool trace) {
  SeededRandom draw(seed);
  Scenario scenario = DrawScenario(draw);
  ParseBug(options.bug, &scenario.bug);             // checked by the caller
  SeededRandom typos(seed ^ 0x7970'6f73ULL);        // a stream of its own: the others stay
  SeededRandom budgets(seed ^ 0x6275'6467ULL);      // so has the retry budget
  SeededRandom lines(seed ^ 0x6c69'6e65ULL);        // and the connection lines
  SeededRandom agent_draws(seed ^ 0x6167'656eULL);  // and the agents (half the seeds)
  SeededRandom reads(seed ^ 0x7265'6164ULL);        // and whether reads may wait
  scenario.remote_reads = reads.Chance(0.5);
  if (scenario.coordinators == 2 && lines.Chance(0.5))
    scenario.faults.line_wait = lines.NextDouble() * 0.1;
  if (budgets.Chance(0.3))
    scenario.retry_budget = {1.0 + budgets.Below(3), 0.2 + budgets.NextDouble() * 2};
  std::set<std::string> meant_gated;
  std::vector<SagaDefinition> sagas = SagasFor(draw, typos, &meant_gated);
  World world(draw.Next(), scenario, std::move(sagas));
  world.set_meant_gated(std::move(meant_gated));
  world.SetTracing(trace);
  Workload work(world, options.sagas > 0 ? options.sagas : 3 + static_cast<int>(draw.Below(6)));
  if (trace)  // the engine's log lines join the trace
    SetLogSink([&world](nlohmann::json& line) {
      int p = world.running_proc();
      world.Trace((p < 0 ? "log " : "log p" + std::to_string(p) + " ") + line.dump());
    });
  Agents agents(world, agent_draws,
                agent_draws.Chance(0.5) ? 1 + static_cast<int>(agent_draws.Below(4)) : 0);
  world.Boot();
  work.Plan(kBusyMs);
  agents.Plan(kBusyMs);
  bool ok = world.RunUntil(world.now() + kBusyMs);
  if (ok) {  // quiet: no faults, every process up, operators still answer
    world.Quiet();
    for (int64_t t = 0; ok && t < kQuietMs && !(AllSettled(world) && work.Done() && agents.Done());
         t += 5000) {
      work.Tend();
      ok = world.RunUntil(world.now() + 5000);
    }
  }
  SeedResult r;
  r.sagas = work.submitted() + static_cast<int>(agents.keys().size());
  r.events = world.events();
  if (ok) {
    std::set<std::string> keys = work.keys();
    keys.insert(agents.keys().begin(), agents.keys().end());
    std::string v = CheckEnd(world, keys);
    if (!v.empty() && v.rfind("liveness", 0) == 0)  // what each process thinks
      for (auto& p : world.processes())
        if (p.engine)
          SIM_TRACE(world,
                    "services of " + std::to_string(p.index) + ": " + p.engine->Services().dump());
    if (!v.empty()) world.Violation(v);
  }
  // While the clients and agents exist: a teardown answers their requests
  // still open (the UAF of a campaign: the world outlived the clients and
  // wrote answers into their freed exchanges).
  world.StopAll();
  if (trace) SetLogSink([](nlohmann::json&) {});
  r.violation = world.violation();
  r.ok = r.violation.empty();
  if (trace) r.trace = world.TraceTail(2048);
  return r;
}

}  // namespace

SeedResult RunSeed(uint64_t seed, const RunOptions& options) {
  SeedResult r = RunOnce(seed, options, options.trace);
  if (r.ok || options.trace) return r;
  // The same seed again with the trace on: the same run, exactly.
  SeedResult traced = RunOnce(seed, options, true);
  if (traced.violation != r.violation || traced.events != r.events)
    traced.violation = "the simulator is not deterministic: untraced \"" + r.violation +
                       "\" after " + std::to_string(r.events) + " events, traced \"" +
                       traced.violation + "\" after " + std::to_string(traced.events);
  traced.ok = false;
  return traced;
}

}  // namespace sagad::sim
