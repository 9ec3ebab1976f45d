// Agents of one seed (docs/agents.md): each opens a run of the toolbox
// `sim_tools` with a key of its own, records a decision (its "model"'s
// choice of tool, drawn afresh each time it is asked) before each call and
// makes the call the recorded decision names, appends calls one by one at random
// times (now and then one its schema refuses, which must record nothing),
// "crashes" (between a decision and its call, or after a call) and asks
// again, a call over a guard of the toolbox (429) is left out, and at last
// finishes, aborts
// (finishing instead when an irreversible call makes abort refused) or falls
// silent (its run must go to review when its idle timeout passes). Every
// request goes to a random live process and is sent again on an error,
// with the same key or call_id. Operators (Workload::Tend) approve and
// reject the calls that wait for them, and resolve calls under review.
// Draws come from a stream of their own, and a seed has agents only when
// that stream says so: the seeds without keep every other draw they had.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "coordinator/sim/api_client.h"
#include "coordinator/sim/world.h"
#include "sagas/toolbox.h"

namespace sagad::sim {

// The toolbox every simulated process registers.
ToolboxDefinition SimTools();

class Agents {
 public:
  Agents(World& world, SeededRandom& random, int agents)
      : world_(world), r_(random), agents_(agents) {}

  void Plan(int64_t busy_ms);
  // Every agent is done: its run ended as asked, or it fell silent.
  bool Done() const;
  // The runs' keys (each opens one run).
  const std::set<std::string>& keys() const { return keys_; }

 private:
  enum class End { kFinish, kAbort, kSilent };
  struct Agent {
    std::string key;
    std::string run;  // once opened
    int calls = 0;    // how many it makes
    int next = 0;     // the next call
    int tries = 0;    // requests of the current step
    End end = End::kFinish;
    bool done = false;
    // The decision of each call as the agent holds it now (lost in a
    // "crash"), and the first answer sagad gave for it (never changes).
    std::map<int, nlohmann::json> decided, answered;
  };

  Process* Live();
  void Later(size_t a, int64_t min_ms, int64_t max_ms);
  // Each request goes through the HTTP API of a live process (ApiClient):
  // its answer comes from the commit's continuation, and the agent's next
  // step is planned from there.
  void Step(size_t a);
  void Open(size_t a);
  void Opened(size_t a, const ApiClient::Answer& out);
  void Call(size_t a);
  void Called(size_t a, const nlohmann::json& call, const ApiClient::Answer& out);
  void Finish(size_t a);
  void Ended(size_t a, const ApiClient::Answer& out);
  void Operate(const Agent& g);
  void Decide(size_t a);
  nlohmann::json Model(const Agent& g, int n);
  nlohmann::json CallOf(const Agent& g, int n);

  World& world_;
  SeededRandom& r_;
  int agents_;
  std::vector<Agent> all_;
  std::set<std::string> keys_;
  // Made only in a seed with agents: the seeds without keep their draws.
  std::unique_ptr<ApiClient> client_;
};

}  // namespace sagad::sim
