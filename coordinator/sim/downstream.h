// Simulated downstream services and the Adapter a simulated process calls
// them through. The services keep the ground truth the invariants judge by:
// which logical operation (idempotency key) took effect, how many times,
// when, and which were received and refused.
//
// Each service follows the downstream protocol (docs/downstream-protocol.md)
// as the seed draws it: deduplicating by key or not, queryable or not. Each
// refuses an attempt that arrives after a question about it (a 404 answer
// stays true), and one that does not deduplicate also refuses a fencing
// token lower than one it has seen: the protocol's two extensions. Some keys are refused (422, and
// the refusal is stored: asked later, it says "refused"). Reconciliation answers are true, in the
// protocol's words (committed / refused / 404), sometimes unclear (503, an unknown outcome word,
// in_progress while a request is on its way): never a lie.
//
// A reply comes back as the production adapter's does: CallAsync and
// QueryAsync answer in a World task of their own, 0-2 ms after the request
// (the HTTP client's loop, nobody's owner), never before they return; the
// engine then hands the reply to the instance's owner, as in production.
// A process killed meanwhile gets no answer but "connection lost".
//
// Faults of one call (drawn per call): lost before the service (503), lost
// after the effect (the reply never comes), 429, connection refused,
// delayed (the request arrives later, as a task of the World), a wait in
// the service's connection line (after which the request's may_write is
// asked, as the HTTP client asks it, and a refusal withholds it), and a
// pause of the calling process right before its request leaves.
// Thread-safety: none (the World's one thread).
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "adapters/adapter.h"

namespace sagad::sim {

class World;

struct FaultRates {
  double lost_before = 0;   // 503, nothing happened
  double lost_after = 0;    // it happened, the reply is lost
  double too_many = 0;      // 429
  double refused_conn = 0;  // nothing left the process
  double delayed = 0;       // arrives 1-3000 ms later; the caller times out
  double pause = 0;         // the caller pauses up to 2 leases before it sends
  // The request waits in its service's connection line up to 2 leases
  // before it may be written, its process standing still meanwhile (as
  // when its database link is frozen: no lease is renewed). Drawn from a
  // stream of its own (World::lines), so that other draws stay.
  double line_wait = 0;
  double unclear_answer = 0;
  double refusals = 0;  // share of forward keys a service refuses (422)
};

// One effect a service applied (the ground truth).
struct Effect {
  int64_t at = 0;
  std::string service, key, instance, step;
  bool compensation = false;
};

struct Operation {
  std::string service;
  int effects = 0;  // more than one at a non-deduplicating service: a violation
  bool refused = false;
  nlohmann::json result;
  int questioned = 0;  // highest attempt asked about
  int pending = 0;     // delayed requests still on their way
  int held = 0;        // requests a paused process holds before its socket
  // SHA-256 of "METHOD path\n" + the canonical body of the request that took
  // effect (what an approval is bound to: coordinator/engine/steps/step_request.h).
  std::string request_hash;
};

class Downstreams {
 public:
  explicit Downstreams(World& world) : world_(world) {}

  // Draws each service's kind (from the names the sagas call).
  void Configure(const std::set<std::string>& names);
  const std::map<std::string, ServiceConfig>& configs() const { return configs_; }

  // A request arrives at its service: status and body of the answer.
  std::pair<int, nlohmann::json> Deliver(const CallRequest& req);
  // GET operations/{key}: status and body.
  std::pair<int, nlohmann::json> Answer(const std::string& service, const std::string& key,
                                        int attempt);

  const Operation* Find(const std::string& key) const;
  Operation& Op(const std::string& key) { return ops_[key]; }
  const std::vector<Effect>& effects() const { return effects_; }

 private:
  bool Refuses(const std::string& key) const;
  std::pair<int, nlohmann::json> Apply(const CallRequest& req, Operation& op);

  World& world_;
  std::map<std::string, ServiceConfig> configs_;
  std::map<std::string, Operation> ops_;
  std::map<std::string, uint64_t> max_token_;  // by instance
  std::vector<Effect> effects_;
  uint64_t refs_ = 0;
};

// The Adapter of one process incarnation.
class SimAdapter final : public Adapter {
 public:
  SimAdapter(World& world, int proc, uint64_t incarnation)
      : world_(world), proc_(proc), incarnation_(incarnation) {}
  void Kill() { dead_ = true; }

  CallResult Call(const CallRequest& req) override;
  void CallAsync(const CallRequest& req, CallDone done) override;
  void QueryAsync(const std::string& service, const std::string& key,
                  const std::string& instance_id, uint64_t fencing_token, int attempt,
                  const TraceContext& trace, QueryDone done) override;
  QueryResult Query(const std::string& service, const std::string& key,
                    const std::string& instance_id, uint64_t fencing_token, int attempt,
                    const TraceContext& trace) override;
  const ServiceConfig* Service(const std::string& name) const override;
  std::vector<std::string> ServiceNames() const override;

 private:
  // The lease rule, judged by the store's truth when the request leaves.
  void CheckLease(const CallRequest& req);
  // Runs `answer` as the reply's own task of this incarnation, soon, on
  // the client's loop (ThreadRole::kHttpLoop: it must not block).
  void Reply(std::function<void()> answer);
  // What the HTTP adapter would make of `body` from `service`. Services
  // beta and delta end every error body with a raw NUL and a trailer (as
  // some frameworks do), which the store must never see raw.
  static CallResult Result(const std::string& service, int status, const nlohmann::json& body);

  World& world_;
  int proc_;
  uint64_t incarnation_;
  bool dead_ = false;
};

}  // namespace sagad::sim
