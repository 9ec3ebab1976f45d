// graph_bench: the cost of looking at a large graph while it is undone.
//
// A saga of STEPS steps (default 256, the registration limit), each after up
// to DEPS earlier ones (default 16: 4,096 dependencies in all), every step
// committed, then compensated one undo at a time in reverse topological
// order. At each undo it times what every transition and every view asks:
// the planner's next actions and the instance's current steps. The baseline,
// measured in the same run on the same instance, is the walk per pair of
// steps these used before (an "is ancestor" depth-first walk for every
// pair); the ratio is what the one-walk version (sagas/ancestors.h) costs
// against it. Prints one JSON line.
//   graph_bench [--steps N] [--deps D]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policies/planner.h"
#include "sagas/instance.h"

namespace sagad {
namespace {

using Clock = std::chrono::steady_clock;

SagaDefinition Graph(int steps, int deps) {
  SagaBuilder b("big", 1);
  b.CompensationOrder(CompensationOrder::kReverseTopological).MaxParallel(1);
  for (int i = 0; i < steps; ++i) {
    std::vector<std::string> after;
    for (int d = 1; d <= deps && i - d >= 0; ++d) after.push_back("s" + std::to_string(i - d));
    b.Step("s" + std::to_string(i))
        .Call("svc", "POST", "/s")
        .Compensate("svc", "POST", "/u")
        .AfterSteps(after);
  }
  auto def = b.Build();
  if (!def.ok()) {
    std::cerr << def.status().ToString() << "\n";
    std::exit(2);
  }
  return *def;
}

void Apply(Instance& inst, const std::string& step, const std::string& type) {
  Event e;
  e.seq = inst.last_seq() + 1;
  e.type = type;
  e.step = step;
  Status s = inst.Apply(e);
  if (!s.ok()) {
    std::cerr << type << " " << step << ": " << s.ToString() << "\n";
    std::exit(2);
  }
}

// The committed steps no pending undo of a descendant holds up: what the
// planner and the views found before, with a walk per pair.
int PairwiseReady(const Instance& inst) {
  const int n = static_cast<int>(inst.steps().size());
  auto pending = [&](int k) {
    StepStatus s = inst.step(k).status();
    return s == StepStatus::kCommitted || s == StepStatus::kCompensating;
  };
  int ready = 0;
  for (int i = 0; i < n; ++i) {
    if (inst.step(i).status() != StepStatus::kCommitted) continue;
    bool blocked = false;
    for (int k = 0; k < n && !blocked; ++k) blocked = k != i && pending(k) && inst.IsAncestor(i, k);
    if (!blocked) ++ready;
  }
  return ready;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace
}  // namespace sagad

int main(int argc, char** argv) {
  using namespace sagad;
  int steps = 256, deps = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--deps")) deps = std::atoi(argv[i + 1]);
  }
  SagaDefinition def = Graph(steps, deps);
  Instance inst;
  Event created = Instance::CreatedEvent("g1", def, nlohmann::json::object());
  created.seq = 1;
  if (!inst.Apply(created).ok()) return 2;
  for (const auto& st : def.steps) {
    Apply(inst, st.name, StepEventName(StepEvent::kStart));
    Apply(inst, st.name, StepEventName(StepEvent::kCommit));
  }
  Apply(inst, "", SagaEventName(SagaEvent::kStartCompensation));
  Clock::duration now{}, before{};
  int undos = 0;
  long checksum = 0;
  for (;;) {
    auto t0 = Clock::now();
    std::vector<Action> next = NextActions(def, inst);
    checksum += static_cast<long>(inst.CurrentSteps().size());
    auto t1 = Clock::now();
    checksum += PairwiseReady(inst);  // the baseline: planner's and view's walk per pair
    checksum += PairwiseReady(inst);
    auto t2 = Clock::now();
    now += t1 - t0;
    before += t2 - t1;
    if (next.front().kind != ActionKind::kCompensate) break;
    const std::string& name = inst.step(next.front().step).name;
    Apply(inst, name, StepEventName(StepEvent::kBeginCompensation));
    Apply(inst, name, StepEventName(StepEvent::kCompensationDone));
    ++undos;
  }
  nlohmann::json out = {
      {"steps", steps},
      {"dependencies", static_cast<int>(def.steps.size()) * deps - deps * (deps + 1) / 2},
      {"undos", undos},
      {"one_walk_ms_per_undo", 1000 * Seconds(now) / std::max(undos, 1)},
      {"walk_per_pair_ms_per_undo", 1000 * Seconds(before) / std::max(undos, 1)},
      {"ratio", Seconds(now) / Seconds(before)},
      {"checksum", checksum}};
  std::cout << out.dump() << "\n";
  return undos == steps ? 0 : 1;
}
