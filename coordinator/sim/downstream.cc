#include "coordinator/sim/downstream.h"

#include "adapters/classify.h"
#include "adapters/sha256.h"
#include "coordinator/sim/world.h"
#include "util/json_limits.h"
#include "util/thread_role.h"

namespace sagad::sim {
namespace {

bool IsCompensation(const std::string& key) {
  const std::string suffix = ":compensate";
  return key.size() > suffix.size() &&
         key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0;
}

uint64_t Hash(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

}  // namespace

void Downstreams::Configure(const std::set<std::string>& names) {
  SeededRandom& r = world_.random();
  for (const auto& name : names) {
    ServiceConfig c;
    c.name = name;
    c.base_url = "sim://" + name;
    c.idempotent = r.Chance(0.7);
    c.queryable = r.Chance(0.85);
    c.retry.max_attempts = 2 + static_cast<int>(r.Below(4));
    c.retry.initial_backoff_ms = 50;
    c.retry.max_backoff_ms = 2000;
    if (r.Chance(0.3)) c.max_in_flight = 1 + static_cast<int>(r.Below(3));
    const RetryBudgetConfig& tight = world_.scenario().retry_budget;
    if (tight.capacity > 0) c.retry_budget = tight;
    configs_[name] = c;
  }
}

bool Downstreams::Refuses(const std::string& key) const {
  double share = world_.scenario().faults.refusals;
  return !IsCompensation(key) && (Hash(key) % 1000) < share * 1000;
}

const Operation* Downstreams::Find(const std::string& key) const {
  auto it = ops_.find(key);
  return it == ops_.end() ? nullptr : &it->second;
}

std::pair<int, nlohmann::json> Downstreams::Deliver(const CallRequest& req) {
  const ServiceConfig& svc = configs_.at(req.service);
  Operation& op = ops_[req.idempotency_key];
  op.service = req.service;
  if (!svc.idempotent) {  // fencing: the protocol's extension for these
    uint64_t& seen = max_token_[req.instance_id];
    if (req.fencing_token < seen) return {409, {{"error", "stale fencing token"}}};
    seen = req.fencing_token;
  }
  // A 404 answer is final: an attempt asked about never takes effect later.
  if (req.attempt <= op.questioned) return {409, {{"error", "attempt arrived after a question"}}};
  if (op.refused) return {422, {{"error", "refused (stored)"}}};
  // Compensations are idempotent by contract, whatever the service's kind.
  const bool dedup = svc.idempotent || IsCompensation(req.idempotency_key);
  if (op.effects > 0 && dedup) {
    nlohmann::json body = op.result;
    return {200, body};
  }
  if (op.effects == 0 && Refuses(req.idempotency_key)) {
    op.refused = true;
    return {422, {{"error", "refused"}}};
  }
  return Apply(req, op);
}

std::pair<int, nlohmann::json> Downstreams::Apply(const CallRequest& req, Operation& op) {
  const bool compensation = IsCompensation(req.idempotency_key);
  if (compensation) {
    std::string forward = req.idempotency_key.substr(0, req.idempotency_key.size() - 11);
    const Operation* f = Find(forward);
    if (!f || f->effects == 0)
      world_.Violation("undo before its forward effect: " + req.idempotency_key);
  }
  if (op.effects > 0)
    world_.Violation("second effect of " + req.idempotency_key + " at " + req.service +
                     " (does not deduplicate)");
  ++op.effects;
  if (op.effects == 1) {
    op.result = {{"ref", req.service + "-" + std::to_string(++refs_)}, {"ok", true}};
    op.request_hash = Sha256Hex(req.method + " " + req.path + "\n" + CanonicalJson(req.body));
  }
  effects_.push_back(
      {world_.now(), req.service, req.idempotency_key, req.instance_id, req.step, compensation});
  SIM_TRACE(world_, "effect " + req.idempotency_key + " at " + req.service);
  return {201, op.result};
}

std::pair<int, nlohmann::json> Downstreams::Answer(const std::string& service,
                                                   const std::string& key, int attempt) {
  SeededRandom& r = world_.random();
  Operation& op = ops_[key];
  op.service = service;
  op.questioned = std::max(op.questioned, attempt);
  if (r.Chance(world_.scenario().faults.unclear_answer)) {
    switch (r.Below(3)) {
      case 0:
        return {503, {{"error", "unavailable"}}};
      case 1:
        return {200, {{"outcome", "perhaps"}}};
      default:
        return {200, {{"outcome", "in_progress"}}};
    }
  }
  if (op.pending > 0 && op.effects == 0 && !op.refused && r.Chance(0.5))
    return {200, {{"outcome", "in_progress"}}};
  if (op.effects > 0) {
    if (r.Chance(0.5)) return {200, op.result};
    return {200, {{"outcome", "committed"}, {"http_status", 201}, {"result", op.result}}};
  }
  if (op.refused) {
    if (r.Chance(0.5)) return {200, {{"outcome", "refused"}}};
    return {200, {{"http_status", 422}, {"error", "refused"}}};
  }
  return {404, {{"error", "no such operation"}}};
}

// ---- SimAdapter ----

const ServiceConfig* SimAdapter::Service(const std::string& name) const {
  const auto& c = world_.downstreams().configs();
  auto it = c.find(name);
  return it == c.end() ? nullptr : &it->second;
}

std::vector<std::string> SimAdapter::ServiceNames() const {
  std::vector<std::string> out;
  for (const auto& [name, c] : world_.downstreams().configs()) out.push_back(name);
  return out;
}

CallResult SimAdapter::Result(const std::string& service, int status, const nlohmann::json& body) {
  CallResult res;
  res.http_status = status;
  res.outcome = ClassifyHttpStatus(status);
  if (res.outcome == Outcome::kCommitted) {
    res.result = body;
    res.external_ref = ExternalRef(body);
  } else {
    std::string text = body.dump();
    if (service == "beta" || service == "delta") text += std::string("\0trailer", 8);
    res.error = ReplyError(status, text);
  }
  return res;
}

void SimAdapter::CheckLease(const CallRequest& req) {
  auto lease = MemoryStore(world_.data()).GetLease(req.instance_id);
  const std::string me = "c" + std::to_string(proc_) + "/";
  if (!lease.ok() || lease->owner.rfind(me, 0) != 0 || lease->generation != req.fencing_token ||
      lease->expires_at <= world_.now())
    world_.Violation("request " + req.idempotency_key + " from process " + std::to_string(proc_) +
                     " token " + std::to_string(req.fencing_token) + " without a live lease (" +
                     (lease.ok() ? lease->ToJson().dump() : lease.status().ToString()) + ")");
}

CallResult SimAdapter::Call(const CallRequest& req) {
  CallResult dead;
  dead.outcome = ClassifyTransportError(false);
  dead.error = "simulated process is dead";
  if (dead_) return dead;
  const FaultRates& f = world_.scenario().faults;
  if (world_.lines().Chance(f.line_wait)) {  // no connection free: it waits in line
    int64_t wait = 1 + static_cast<int64_t>(world_.lines().Below(2 * world_.scenario().lease_ms));
    SIM_TRACE(world_, req.idempotency_key + " waits " + std::to_string(wait) + " ms in line at " +
                          req.service + ", process " + std::to_string(proc_) + " standing still");
    ++world_.downstreams().Op(req.idempotency_key).held;
    world_.RunOthers(proc_, world_.now() + wait);
    --world_.downstreams().Op(req.idempotency_key).held;
    if (dead_) return dead;
  }
  if (req.may_write) {  // as the HTTP client asks it, right before the socket
    Status may = req.may_write();
    if (!may.ok()) {
      SIM_TRACE(world_, "withheld " + req.idempotency_key + ": " + may.message());
      CallResult withheld;
      withheld.outcome = ClassifyTransportError(false);
      withheld.withheld = true;
      withheld.error = may.message();
      return withheld;
    }
  }
  CheckLease(req);  // the rule, judged when the request is written
  SeededRandom& r = world_.random();
  SIM_TRACE(world_, "send " + req.idempotency_key + " attempt " + std::to_string(req.attempt) +
                        " token " + std::to_string(req.fencing_token) + " from " +
                        std::to_string(proc_));
  if (r.Chance(f.pause)) {  // between the lease check and the socket
    int64_t pause = 1 + static_cast<int64_t>(r.Below(2 * world_.scenario().lease_ms));
    SIM_TRACE(world_,
              "process " + std::to_string(proc_) + " pauses " + std::to_string(pause) + " ms");
    // On its way, though no service can know it yet (found by seed 878772:
    // an operator resolved the step "not executed" meanwhile).
    ++world_.downstreams().Op(req.idempotency_key).held;
    world_.RunOthers(proc_, world_.now() + pause);
    --world_.downstreams().Op(req.idempotency_key).held;
    if (dead_) return dead;
  }
  if (r.Chance(f.refused_conn)) return dead.error = "connection refused", dead;
  if (r.Chance(f.too_many)) return Result(req.service, 429, {{"error", "slow down"}});
  if (r.Chance(f.lost_before)) return Result(req.service, 503, {{"error", "lost before"}});
  Downstreams& d = world_.downstreams();
  if (r.Chance(f.delayed)) {
    ++d.Op(req.idempotency_key).pending;
    World& w = world_;
    w.At(w.now() + 1 + static_cast<int64_t>(r.Below(3000)), [&w, req] {
      --w.downstreams().Op(req.idempotency_key).pending;
      SIM_TRACE(w, "late arrival " + req.idempotency_key);
      w.downstreams().Deliver(req);
    });
    CallResult res;
    res.outcome = ClassifyTransportError(true);
    res.error = "timeout (the request is on its way)";
    return res;
  }
  auto [status, body] = d.Deliver(req);
  if (r.Chance(f.lost_after)) {
    CallResult res;
    res.outcome = ClassifyTransportError(world_.scenario().bug != Bug::kTimeoutAsNotSent);
    res.error = "reply lost";
    return res;
  }
  return Result(req.service, status, body);
}

void SimAdapter::Reply(std::function<void()> answer) {
  const int64_t at = world_.now() + static_cast<int64_t>(world_.random().Below(3));
  world_.Schedule(at, proc_, incarnation_, /*timer=*/false, [answer = std::move(answer)] {
    ScopedThreadRole role(ThreadRole::kHttpLoop);
    answer();
  });
}

void SimAdapter::CallAsync(const CallRequest& req, CallDone done) {
  CallResult res = Call(req);  // the request left (or not) now; its reply comes later
  Reply([this, res = std::move(res), done = std::move(done)]() mutable {
    if (dead_ && res.outcome != Outcome::kNotExecuted) {
      res = CallResult{};  // the process died before it read the reply
      res.outcome = ClassifyTransportError(true);
      res.error = "simulated process is dead";
    }
    done(std::move(res));
  });
}

void SimAdapter::QueryAsync(const std::string& service, const std::string& key,
                            const std::string& instance_id, uint64_t fencing_token, int attempt,
                            const TraceContext& trace, QueryDone done) {
  QueryResult q = Query(service, key, instance_id, fencing_token, attempt, trace);
  Reply([q = std::move(q), done = std::move(done)]() mutable { done(std::move(q)); });
}

QueryResult SimAdapter::Query(const std::string& service, const std::string& key,
                              const std::string&, uint64_t, int attempt, const TraceContext&) {
  if (dead_) return QueryResult{QueryOutcome::kUnknown, nullptr, "", "simulated process is dead"};
  auto [status, body] = world_.downstreams().Answer(service, key, attempt);
  SIM_TRACE(world_, "ask " + key + ": " + std::to_string(status) + " " + body.dump());
  if (world_.scenario().bug == Bug::kRefusalAsSuccess && status == 200)
    return QueryResult{QueryOutcome::kHappened, body, ExternalRef(body), ""};
  return ClassifyQueryAnswer(status, body);
}

}  // namespace sagad::sim
