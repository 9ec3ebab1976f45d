// What the clients and operators of one seed do, and the sagas they run:
// - sagas: the three examples plus a random list (an optional irreversible
//   pivot, approvals, retry policies, a deadline) and a random graph;
// - clients submit instances at random times, each with an
//   Idempotency-Key, to a random live process; a submission that fails is
//   sent again with the same key later, and some are sent twice;
// - operators act at random times: approve or reject what waits, cancel,
//   retry, skip, force a compensation, and resolve a step under review by
//   the ground truth (as a human would after asking the service), only
//   once nothing about it is on its way;
// - crashes (SIGKILL) and pauses of processes at random times.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "coordinator/sim/api_client.h"
#include "coordinator/sim/world.h"

namespace sagad::sim {

// The sagas of one seed. The random ones are sometimes written as JSON by
// an author who misspells the approval key of a gated step (drawn from
// `typos`, a stream of their own so that the other draws stay the same):
// the definition checks must refuse it (the author then fixes it); if they
// accept it, the registered saga runs without the gate. `meant_gated` gets
// every step ("saga/step") its author meant to gate.
std::vector<SagaDefinition> SagasFor(SeededRandom& r, SeededRandom& typos,
                                     std::set<std::string>* meant_gated);

class Workload {
 public:
  Workload(World& world, int sagas) : world_(world), sagas_(sagas), client_(world) {}

  // Schedules the clients, operators and disruptions of the busy phase.
  void Plan(int64_t busy_ms);
  // Quiet phase: an operator answers what waits for one on every instance.
  void Tend();
  // Every client got its answer.
  bool Done() const { return answered_ == sagas_; }
  int submitted() const { return sagas_; }
  const std::set<std::string>& keys() const { return keys_; }

 private:
  // Requests go through the HTTP API of a live process (ApiClient): their
  // answers come from the commits' and the waits' continuations.
  void Submit(int n, int attempt);
  void Submitted(int n, int attempt, const ApiClient::Answer& a);
  // Submission n again, a little later (up to 200 attempts).
  void Again(int n, int attempt);
  // An operator's POST to `target` through the API of process p.
  void Act(Process& p, const std::string& target, const nlohmann::json& body,
           ApiClient::Done then = nullptr);
  void Operate();
  void ActOn(Process& p, const std::string& id, const nlohmann::json& view);
  void Resolve(Process& p, const std::string& id, const std::string& step);
  void Disrupt(int64_t until);
  nlohmann::json InputFor(const SagaDefinition& def, int n);

  World& world_;
  int sagas_;
  ApiClient client_;
  int answered_ = 0;
  std::set<std::string> keys_;
  std::map<std::string, std::string> id_of_;  // client key -> instance id
  std::vector<std::string> ids_;
  std::map<std::string, std::vector<std::string>> input_fields_;  // by saga
};

}  // namespace sagad::sim
