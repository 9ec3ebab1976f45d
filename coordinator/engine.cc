#include "coordinator/engine.h"

#include "coordinator/waiters.h"
#include "sagas/json_limits.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "adapters/classify.h"
#include "adapters/sha256.h"
#include "coordinator/crash_point.h"
#include "coordinator/metrics.h"
#include "sagas/instance.h"
#include "policies/approval_policy.h"
#include "policies/failure_policy.h"
#include "policies/retry_budget.h"
#include "sagas/planner.h"
#include "sagas/template.h"

namespace sagad {
namespace {

constexpr size_t kStripes = 64;

// One structured JSON line per significant event on stderr. Never tokens or
// request bodies.
void Log(nlohmann::json line) {
  static std::mutex mu;
  auto now = std::chrono::system_clock::now();
  time_t t = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm;
  gmtime_r(&t, &tm);
  char ts[64];
  snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  line["ts"] = ts;
  line["level"] = "info";
  std::lock_guard<std::mutex> l(mu);
  std::cerr << DumpJson(line) << "\n";
}

std::string NewInstanceId(int64_t now_ms) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  uint64_t r;
  {
    std::lock_guard<std::mutex> l(mu);
    r = rng();
  }
  char buf[40];
  snprintf(buf, sizeof buf, "%012llx-%016llx", static_cast<unsigned long long>(now_ms),
           static_cast<unsigned long long>(r));
  return buf;
}

// The events and operation records of one transition, applied to a copy of
// the instance as they are added (so the MSM tables validate each one).
class Tx {
 public:
  Tx(Instance& inst, int64_t now) : inst_(inst), now_(now) {}

  Status Step(int i, StepEvent e, nlohmann::json data = nlohmann::json::object()) {
    return Add(inst_.step(i).name, StepEventName(e), std::move(data), i);
  }
  Status Saga(SagaEvent e, nlohmann::json data = nlohmann::json::object()) {
    return Add("", SagaEventName(e), std::move(data), -1);
  }
  // A step note that changes no machine state (reconciled, retry_deferred,
  // retry_requested).
  Status Note(int i, const char* type, nlohmann::json data) {
    return Add(inst_.step(i).name, type, std::move(data), i);
  }
  const Instance& inst() const { return inst_; }
  std::vector<Event>& events() { return events_; }
  std::vector<OperationRecord> Operations() const {
    std::vector<OperationRecord> ops;
    for (int i : touched_) {
      const StepState& st = inst_.step(i);
      bool in_comp = st.status() == StepStatus::kCompensating ||
                     st.status() == StepStatus::kCompensated ||
                     st.machine.reviewing_compensation() || st.comp_attempts > 0;
      if (!st.key.empty()) {
        OperationRecord op;
        op.key = st.key;
        op.instance_id = inst_.id();
        op.step = st.name;
        op.kind = "forward";
        op.args_hash = st.args_hash;
        op.state = in_comp ? "COMMITTED" : StepStatusName(st.status());
        op.attempts = st.attempts;
        op.external_ref = st.external_ref;
        op.result = st.result;
        op.last_error = st.last_error;
        op.updated_at = now_;
        ops.push_back(std::move(op));
      }
      if (!st.comp_key.empty()) {
        OperationRecord op;
        op.key = st.comp_key;
        op.instance_id = inst_.id();
        op.step = st.name;
        op.kind = "compensation";
        op.args_hash = st.comp_args_hash;
        op.state = st.status() == StepStatus::kCommitted ? "NOT_EXECUTED"
                                                          : StepStatusName(st.status());
        op.attempts = st.comp_attempts;
        op.result = st.comp_result;
        op.last_error = st.comp_last_error;
        op.updated_at = now_;
        ops.push_back(std::move(op));
      }
    }
    return ops;
  }

 private:
  Status Add(std::string step, std::string type, nlohmann::json data, int index) {
    Event e;
    e.seq = inst_.last_seq() + 1;
    e.at_ms = now_;
    e.type = std::move(type);
    e.step = std::move(step);
    e.data = std::move(data);
    SAGAD_RETURN_IF_ERROR(inst_.Apply(e));
    events_.push_back(std::move(e));
    if (index >= 0) touched_.insert(index);
    return Status::Ok();
  }

  Instance& inst_;
  int64_t now_;
  std::vector<Event> events_;
  std::set<int> touched_;
};

// What the driver does after an action.
enum class Next { kContinue, kStop };

bool IsRetryableSendState(StepStatus s) {
  return s == StepStatus::kPlanned || s == StepStatus::kStarted || s == StepStatus::kUnknown;
}

}  // namespace

bool Engine::IsSettled(const std::string& status) {
  return status == "COMPLETED" || status == "COMPENSATED" || status == "AWAITING_APPROVAL" ||
         status == "NEEDS_REVIEW";
}

class Engine::Impl {
 public:
  Impl(Store& store, Adapter& adapter, Clock& clock, EngineOptions options)
      : store_(store),
        adapter_(adapter),
        clock_(clock),
        options_(options),
        pool_(static_cast<size_t>(std::max(1, options.workers))),
        work_(boost::asio::make_work_guard(io_)),
        timer_thread_([this] { io_.run(); }),
        rng_(std::random_device{}()) {
    char incarnation[20];
    snprintf(incarnation, sizeof incarnation, "%016llx",
             static_cast<unsigned long long>(std::random_device{}()) << 32 |
                 static_cast<unsigned long long>(std::random_device{}()));
    owner_ = options_.coordinator_id + "/" + incarnation;
    metrics_.Describe("sagad_step_calls_total", "counter",
                      "Downstream calls by phase (forward/compensation) and classified outcome.");
    metrics_.Describe("sagad_reconciliations_total", "counter",
                      "Questions about unclear outcomes, by phase and answer.");
    metrics_.Describe("sagad_events_total", "counter",
                      "Committed instance events by type (escalations: saga_needs_review).");
    metrics_.Describe("sagad_duplicate_effects_detected_total", "counter",
                      "Calls a downstream answered as an idempotent replay.");
    metrics_.Describe("sagad_recovery_latency_seconds", "histogram",
                      "From sagad start to the first transition of each recovered instance.");
    metrics_.Describe("sagad_step_latency_seconds", "histogram", "Downstream call latency.");
    metrics_.Describe("sagad_escalations_total", "counter", "Instances sent to NEEDS_REVIEW.");
    metrics_.Describe("sagad_store_commit_seconds", "histogram",
                      "LMDB write transactions of a transition (writer lock held, fsync included).");
    metrics_.Describe("sagad_retries_total", "counter", "Re-sends of a forward step (same key).");
    metrics_.Describe("sagad_retry_budget_exhausted_total", "counter",
                      "Retries deferred because the service's retry budget was empty.");
    metrics_.Describe("sagad_retention_deleted_total", "counter",
                      "Finished instances deleted by retention (with their events, operation "
                      "records and submission keys).");
    ExportKnownCountersAtZero();
  }

  // Every counter whose label values are known up front is exported at 0
  // from the first scrape, so rate(...{outcome="unknown"}[5m]) and the like
  // work before the first incident.
  void ExportKnownCountersAtZero() {
    for (const char* phase : {"forward", "compensation"}) {
      for (Outcome o : {Outcome::kCommitted, Outcome::kFailed, Outcome::kNotExecuted, Outcome::kUnknown})
        metrics_.Inc("sagad_step_calls_total",
                     std::string("phase=\"") + phase + "\",outcome=\"" + OutcomeName(o) + "\"", 0);
      for (const char* answer : {"happened", "not_happened", "unknown"})
        metrics_.Inc("sagad_reconciliations_total",
                     std::string("phase=\"") + phase + "\",answer=\"" + answer + "\"", 0);
    }
    std::vector<std::string> types = {"instance_created", "reconciled", "retry_deferred",
                                      "retry_requested"};
    for (int k = 0; k <= static_cast<int>(StepEvent::kSkip); ++k)
      types.push_back(StepEventName(static_cast<StepEvent>(k)));
    for (int k = 0; k <= static_cast<int>(SagaEvent::kEscalate); ++k)
      types.push_back(SagaEventName(static_cast<SagaEvent>(k)));
    for (const auto& t : types) metrics_.Inc("sagad_events_total", "type=\"" + t + "\"", 0);
    for (const char* name : {"sagad_duplicate_effects_detected_total", "sagad_escalations_total",
                             "sagad_retries_total", "sagad_retention_deleted_total"})
      metrics_.Inc(name, "", 0);
  }

  ~Impl() { Stop(); }

  // ---- definitions ----
  Status Register(const SagaDefinition& def) {
    SAGAD_RETURN_IF_ERROR(Validate(def));
    std::lock_guard<std::mutex> l(defs_mu_);
    auto& versions = defs_[def.name];
    auto it = versions.find(def.version);
    if (it != versions.end()) {
      if (*it->second == def) return Status::Ok();
      return AlreadyExists("saga " + def.name + " version " + std::to_string(def.version) +
                           " is already registered with a different definition");
    }
    versions[def.version] = std::make_shared<const SagaDefinition>(def);
    return Status::Ok();
  }

  std::vector<SagaDefinitionPtr> Definitions() const {
    std::lock_guard<std::mutex> l(defs_mu_);
    std::vector<SagaDefinitionPtr> out;
    for (const auto& [name, versions] : defs_)
      for (const auto& [v, d] : versions) out.push_back(d);
    return out;
  }

  SagaDefinitionPtr Definition(const std::string& name, int version) const {
    std::lock_guard<std::mutex> l(defs_mu_);
    auto it = defs_.find(name);
    if (it == defs_.end() || it->second.empty()) return nullptr;
    if (version <= 0) return it->second.rbegin()->second;
    auto v = it->second.find(version);
    return v == it->second.end() ? nullptr : v->second;
  }

  // ---- lifecycle ----
  Status Start() {
    auto start = clock_.SteadyNow();
    auto active = store_.ListActive();
    if (!active.ok()) return active.status();
    std::vector<std::string> ids;
    for (const auto& a : *active) ids.push_back(a.id);
    {
      std::lock_guard<std::mutex> l(recovery_mu_);
      recovery_start_ = start;
      recovering_.insert(ids.begin(), ids.end());
    }
    // One transaction takes every lease that is free or was this process's
    // predecessor's; the drivers then start without a write each.
    auto taken = store_.AcquireLeases(ids, owner_, clock_.NowMillis(), options_.lease_ms,
                                      options_.coordinator_id + "/");
    if (taken.ok())
      for (const auto& [id, lease] : *taken) Own(id, lease);
    for (const auto& id : ids) Schedule(id);
    ScheduleHeartbeat();
    if (options_.retention_ms > 0) ScheduleSweep();
    Log({{"msg", "recovery scheduled"}, {"instances", ids.size()},
         {"ms", std::chrono::duration_cast<std::chrono::milliseconds>(clock_.SteadyNow() - start)
                    .count()}});
    return Status::Ok();
  }

  void Stop() {
    {
      std::unique_lock<std::mutex> l(sched_mu_);
      if (stopped_) return;
      stopping_ = true;
      idle_cv_.wait(l, [this] { return running_.empty() && step_tasks_ == 0; });
      stopped_ = true;
    }
    work_.reset();
    io_.stop();
    if (timer_thread_.joinable()) timer_thread_.join();
    pool_.join();
  }

  // ---- submissions ----
  StatusOr<SubmitOutcome> Submit(const std::string& saga, int version, const nlohmann::json& input,
                                 const std::string& client_key, const std::string& request_hash,
                                 const TraceContext& trace) {
    SagaDefinitionPtr def = Definition(saga, version);
    if (!def && version > 0 && Definition(saga, 0))
      return NotFound("saga '" + saga + "' has no registered version " + std::to_string(version));
    if (!def) return NotFound("saga '" + saga + "' is not registered");
    if (!input.is_object()) return InvalidArgument("'input' must be a JSON object");
    std::vector<std::string> missing;
    for (const auto& f : def->RequiredInputFields())
      if (!input.contains(f) || input[f].is_null()) missing.push_back(f);
    if (!missing.empty()) {
      std::string m;
      for (const auto& f : missing) m += (m.empty() ? "" : ", ") + f;
      return InvalidArgument("input is missing required field(s): " + m);
    }
    SubmitOutcome out;
    std::optional<Submission> sub;
    if (!client_key.empty()) {
      std::lock_guard<std::mutex> l(submit_mu_);
      if (inflight_.count(client_key))
        return FailedPrecondition("a request with this Idempotency-Key is still in progress");
      auto existing = store_.GetSubmission(client_key);
      if (existing.ok()) return Replay(*existing, request_hash);
      if (existing.status().code() != StatusCode::kNotFound) return existing.status();
      inflight_.insert(client_key);
      sub.emplace();
      sub->key = client_key;
      sub->request_hash = request_hash;
    }
    int64_t now = clock_.NowMillis();
    std::string id = NewInstanceId(now);
    Instance inst;
    Event created = Instance::CreatedEvent(id, *def, input, trace.ToJson());
    created.seq = 1;
    created.at_ms = now;
    Status s = inst.Apply(created);
    if (s.ok()) {
      inst.set_version(1);
      if (sub) {
        sub->instance_id = id;
        sub->created_at = now;
      }
      Lease lease{owner_, now + options_.lease_ms, 1};
      s = store_.CreateInstance(inst.ToJson(), {created}, sub ? &*sub : nullptr,
                                OutboxMessages(inst, {created}), &lease);
      if (s.ok()) Own(id, lease);
    }
    if (!s.ok()) {
      if (sub) EndInflight(client_key);
      if (sub && s.code() == StatusCode::kAlreadyExists) {
        // Another process sharing the data dir took this key first.
        auto existing = store_.GetSubmission(client_key);
        if (existing.ok()) return Replay(*existing, request_hash);
      }
      return s;
    }
    {
      std::lock_guard<std::mutex> l(stripe(id));
      cache_put(id, std::make_shared<Instance>(inst));
    }
    Log({{"msg", "instance created"}, {"instance", id}, {"saga", saga},
         {"trace_id", trace.trace_id}});
    CrashPoint("after_create");
    Schedule(id);
    out.instance_id = id;
    return out;
  }

  // The answer to a repeated submission key: the first instance, or 422 if
  // the key came with another request.
  static StatusOr<SubmitOutcome> Replay(const Submission& first, const std::string& request_hash) {
    if (first.request_hash != request_hash)
      return AlreadyExists("this Idempotency-Key was already used with a different request");
    SubmitOutcome out;
    out.instance_id = first.instance_id;
    out.replayed = true;
    out.stored_status = first.response_status;
    out.stored_response = first.response;
    return out;
  }

  void FinishSubmission(const std::string& key, int status, const nlohmann::json& response) {
    if (key.empty()) return;
    Status s = store_.SetSubmissionResponse(key, status, response);
    if (!s.ok()) Log({{"msg", "cannot store submission response"}, {"error", s.ToString()}});
    EndInflight(key);
  }

  // ---- reads ----
  StatusOr<nlohmann::json> GetInstance(const std::string& id) { return store_.GetInstance(id); }

  StatusOr<nlohmann::json> WaitSettled(const std::string& id, std::chrono::milliseconds timeout) {
    return waiters_.Wait(id, timeout);
  }
  void WaitSettledAsync(const std::string& id, std::chrono::milliseconds timeout,
                        Waiters::Done done) {
    waiters_.WaitAsync(id, timeout, std::move(done));
  }
  void CancelWaits() { waiters_.CancelAll(); }

  StatusOr<std::vector<Event>> GetEvents(const std::string& id) {
    auto inst = store_.GetInstance(id);
    if (!inst.ok()) return inst.status();
    return store_.GetEvents(id);
  }

  StatusOr<InstancePage> List(const InstanceFilter& filter, size_t limit,
                              const std::string& cursor) {
    return store_.ListInstances(filter, limit, cursor);
  }

  // Every step awaiting approval, oldest first, with the exact request an
  // approval lets go (the approval binds to its key and args hash).
  StatusOr<nlohmann::json> Approvals() {
    auto active = store_.ListActive();
    if (!active.ok()) return active.status();
    std::vector<nlohmann::json> out;
    for (const auto& a : *active) {
      const std::string& id = a.id;
      // A step waits for approval only while its saga does, or after an
      // approval timeout escalated the saga to review.
      if (a.status != "AWAITING_APPROVAL" && a.status != "NEEDS_REVIEW") continue;
      auto inst = Load(id);
      if (!inst.ok()) continue;
      SagaDefinitionPtr def = Definition((*inst)->saga(), (*inst)->saga_version());
      for (size_t i = 0; i < (*inst)->steps().size(); ++i) {
        const StepState& st = (*inst)->step(i);
        if (st.status() != StepStatus::kAwaitingApproval) continue;
        nlohmann::json request = nullptr;
        if (def) {
          const CallSpec& call = def->steps[i].forward;
          const ServiceConfig* svc = adapter_.Service(call.service);
          auto r = Render(**inst, call);
          if (r.ok())
            request = {{"service", call.service},
                       {"method", call.method},
                       {"url", (svc ? svc->base_url : std::string()) + r->path},
                       {"body", r->body},
                       {"idempotency_key", id + ":" + st.name},
                       {"args_hash", r->hash}};
          else
            request = {{"error", r.status().message()}};
        }
        out.push_back({{"instance_id", id}, {"saga", (*inst)->saga()},
                       {"saga_version", (*inst)->saga_version()}, {"step", st.name},
                       {"key", id + ":" + st.name}, {"input", (*inst)->input()},
                       {"since", st.approval_requested_at}, {"request", request}});
      }
    }
    std::stable_sort(out.begin(), out.end(), [](const nlohmann::json& x, const nlohmann::json& y) {
      return x.value("since", int64_t(0)) < y.value("since", int64_t(0));
    });
    return nlohmann::json(out);
  }

  // Unfinished instances by status (from the index: no snapshot is read).
  StatusOr<nlohmann::json> Counts() {
    auto active = store_.ListActive();
    if (!active.ok()) return active.status();
    nlohmann::json by = {{"RUNNING", 0}, {"AWAITING_APPROVAL", 0}, {"COMPENSATING", 0},
                         {"NEEDS_REVIEW", 0}};
    for (const auto& a : *active) by[a.status] = by.value(a.status, 0) + 1;
    return nlohmann::json{{"unfinished", by}, {"total_unfinished", active->size()}};
  }

  StatusOr<nlohmann::json> Bundle(const std::string& id) {
    auto j = store_.GetInstance(id);
    if (!j.ok()) return j.status();
    auto events = store_.GetEvents(id);
    if (!events.ok()) return events.status();
    nlohmann::json evs = nlohmann::json::array();
    for (const auto& e : *events) evs.push_back(e.ToJson());
    nlohmann::json ops = nlohmann::json::array(), confirmed = nlohmann::json::array(),
                   unknown = nlohmann::json::array();
    for (const auto& st : (*j)["steps"]) {
      std::string name = st.value("name", "");
      for (const std::string& key : {id + ":" + name, id + ":" + name + ":compensate"}) {
        auto op = store_.GetOperation(key);
        if (!op.ok()) continue;
        nlohmann::json oj = op->ToJson();
        ops.push_back(oj);
        if (op->state == "COMMITTED" || op->state == "COMPENSATED")
          confirmed.push_back({{"key", key}, {"step", name}, {"kind", op->kind},
                               {"external_ref", op->external_ref}});
        if (op->state == "STARTED" || op->state == "UNKNOWN" || op->state == "COMPENSATING" ||
            op->state == "NEEDS_REVIEW")
          unknown.push_back({{"key", key}, {"step", name}, {"kind", op->kind},
                             {"last_error", op->last_error}});
      }
    }
    std::string status = j->value("status", "");
    std::string recommendation;
    if (status != "NEEDS_REVIEW") {
      recommendation = "none: the instance is " + status;
    } else if (!unknown.empty()) {
      recommendation =
          "check the downstream for each unknown effect by its idempotency key, then POST "
          ".../steps/{step}/resolve with outcome \"committed\" (and external_ref) or "
          "\"not_executed\"";
    } else {
      recommendation = "inspect review_reason; resolve the step it names";
    }
    SagaDefinitionPtr def = Definition(j->value("saga", ""), j->value("saga_version", 0));
    nlohmann::json plan = nlohmann::json::array();
    if (def) {
      auto events_inst = Instance::Replay(id, *def, *events);
      if (events_inst.ok()) plan = CompensationPlan(*def, *events_inst);
    }
    return nlohmann::json{{"instance", *j},
                          {"definition", def ? def->ToJson() : nlohmann::json()},
                          {"compensations", plan},
                          {"reason", j->value("review_reason", "")},
                          {"events", evs},
                          {"operations", ops},
                          {"confirmed_effects", confirmed},
                          {"unknown_effects", unknown},
                          {"recommended_action", recommendation}};
  }

  // ---- operator actions ----
  // An operator's transition (no lease needed: it makes no downstream call);
  // the owner's driver then carries on from the new state.
  Status OperatorAction(const std::string& id, const std::function<Status(Tx&)>& fn) {
    Status s = Mutate(id, fn);
    if (s.ok()) Schedule(id);
    return s;
  }

  Status Approve(const std::string& id, const std::string& step, const std::string& actor,
                 const std::string& comment) {
    return OperatorAction(id, [&](Tx& tx) -> Status {
      int i = FindStep(tx.inst(), step);
      if (i < 0) return NotFound("instance " + id + " has no step '" + step + "'");
      const StepState& st = tx.inst().step(i);
      if (st.status() != StepStatus::kAwaitingApproval) {
        if (st.machine.approved()) return Status::Ok();  // already approved: nothing to do
        return FailedPrecondition("step '" + step + "' is not awaiting approval (it is " +
                                  StepStatusName(st.status()) + ")");
      }
      // The approval binds to the exact request: key and args hash.
      SagaDefinitionPtr def = Definition(tx.inst().saga(), tx.inst().saga_version());
      if (!def)
        return FailedPrecondition("saga " + tx.inst().saga() + " version " +
                                  std::to_string(tx.inst().saga_version()) + " is not registered");
      auto r = Render(tx.inst(), def->steps[i].forward);
      if (!r.ok()) return FailedPrecondition("cannot build the request to approve: " + r.status().message());
      SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kApprove,
                                    {{"by", actor}, {"comment", comment},
                                     {"key", id + ":" + step}, {"args_hash", r->hash}}));
      if (tx.inst().status() == SagaStatus::kAwaitingApproval)
        SAGAD_RETURN_IF_ERROR(tx.Saga(SagaEvent::kResume, {{"by", actor}}));
      return Status::Ok();
    });
  }

  Status Reject(const std::string& id, const std::string& step, const std::string& actor,
                const std::string& reason) {
    return OperatorAction(id, [&](Tx& tx) -> Status {
      int i = FindStep(tx.inst(), step);
      if (i < 0) return NotFound("instance " + id + " has no step '" + step + "'");
      const StepState& st = tx.inst().step(i);
      if (st.status() == StepStatus::kRejected) return Status::Ok();
      if (st.status() != StepStatus::kAwaitingApproval)
        return FailedPrecondition("step '" + step + "' is not awaiting approval (it is " +
                                  StepStatusName(st.status()) + ")");
      SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kReject, {{"by", actor}, {"reason", reason}}));
      return tx.Saga(SagaEvent::kStartCompensation,
                     {{"by", actor}, {"reason", "step '" + step + "' rejected: " + reason}});
    });
  }

  Status Cancel(const std::string& id, const std::string& actor, const std::string& reason) {
    SagaDefinitionPtr def;
    return OperatorAction(id, [&](Tx& tx) -> Status {
      const Instance& inst = tx.inst();
      def = Definition(inst.saga(), inst.saga_version());
      if (!def) return Internal("definition of " + inst.saga() + " is not registered");
      SagaStatus ss = inst.status();
      if (ss == SagaStatus::kCompensating || ss == SagaStatus::kCompensated) return Status::Ok();
      if (ss == SagaStatus::kCompleted)
        return FailedPrecondition("instance " + id + " already completed; nothing to cancel");
      if (PivotCommitted(*def, inst))
        return FailedPrecondition("instance " + id +
                                  " has committed its irreversible step; it can only go forward");
      if (ss == SagaStatus::kNeedsReview)
        return FailedPrecondition("instance " + id +
                                  " needs review; resolve it, or force compensation with "
                                  "POST .../compensate");
      for (size_t i = 0; i < inst.steps().size(); ++i)
        if (inst.step(i).status() == StepStatus::kAwaitingApproval)
          SAGAD_RETURN_IF_ERROR(tx.Step(static_cast<int>(i), StepEvent::kReject,
                                        {{"by", actor}, {"reason", "cancelled: " + reason}}));
      return tx.Saga(SagaEvent::kStartCompensation,
                     {{"by", actor}, {"cancelled", true}, {"reason", "cancelled: " + reason}});
    });
  }

  // Retry now: a step waiting on a retry timer (or whose retries ran out and
  // sent the saga to review) is tried again at once with the same key.
  Status RetryNow(const std::string& id, const std::string& step, const std::string& actor,
                  const std::string& comment) {
    return OperatorAction(id, [&](Tx& tx) -> Status {
      int i = FindStep(tx.inst(), step);
      if (i < 0) return NotFound("instance " + id + " has no step '" + step + "'");
      const StepState& st = tx.inst().step(i);
      SagaStatus ss = tx.inst().status();
      bool waiting = st.retry_at > 0 && (ss == SagaStatus::kRunning || ss == SagaStatus::kCompensating);
      bool exhausted = ss == SagaStatus::kNeedsReview && st.status() == StepStatus::kPlanned &&
                       st.retries > 0 && !tx.inst().reviewing_compensation();
      if (!waiting && !exhausted) {
        if (st.status() == StepStatus::kUnknown || st.status() == StepStatus::kNeedsReview)
          return FailedPrecondition("step '" + step +
                                    "' has an unknown outcome; a retry could duplicate it: "
                                    "resolve it instead");
        return FailedPrecondition("step '" + step + "' is not waiting for a retry (it is " +
                                  StepStatusName(st.status()) + ", saga " + SagaStatusName(ss) + ")");
      }
      SAGAD_RETURN_IF_ERROR(tx.Note(i, "retry_requested", {{"by", actor}, {"comment", comment}}));
      if (exhausted) return tx.Saga(SagaEvent::kResume, {{"by", actor}, {"step", step}});
      return Status::Ok();
    });
  }

  // Skip: an operator supplies the result of a step that has not been sent
  // (or whose unknown outcome is under review); the saga goes on with it.
  Status Skip(const std::string& id, const std::string& step, const nlohmann::json& result,
              const std::string& external_ref, const std::string& actor, const std::string& comment) {
    return OperatorAction(id, [&](Tx& tx) -> Status {
      int i = FindStep(tx.inst(), step);
      if (i < 0) return NotFound("instance " + id + " has no step '" + step + "'");
      const StepState& st = tx.inst().step(i);
      SagaStatus ss = tx.inst().status();
      bool ok_state = (st.status() == StepStatus::kPlanned &&
                       (ss == SagaStatus::kRunning || ss == SagaStatus::kNeedsReview)) ||
                      (st.status() == StepStatus::kNeedsReview && !st.machine.reviewing_compensation());
      if (!ok_state)
        return FailedPrecondition("step '" + step + "' cannot be skipped now (it is " +
                                  StepStatusName(st.status()) + ", saga " + SagaStatusName(ss) +
                                  "); only a step not yet sent, or under review, can be");
      nlohmann::json res = result.is_null() ? nlohmann::json::object() : result;
      std::string ref = !external_ref.empty() ? external_ref : ExternalRef(res);
      SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kSkip,
                                    {{"result", res}, {"external_ref", ref}, {"by", actor},
                                     {"comment", comment}}));
      if (tx.inst().status() == SagaStatus::kNeedsReview)
        return tx.Saga(SagaEvent::kResume, {{"by", actor}, {"step", step}});
      return Status::Ok();
    });
  }

  // Force the reverse path of an instance in NEEDS_REVIEW.
  Status ForceCompensate(const std::string& id, const std::string& actor,
                         const std::string& reason) {
    return OperatorAction(id, [&](Tx& tx) -> Status {
      const Instance& inst = tx.inst();
      if (inst.status() != SagaStatus::kNeedsReview)
        return FailedPrecondition("instance " + id + " is not in NEEDS_REVIEW (it is " +
                                  SagaStatusName(inst.status()) + "); use cancel to stop a running saga");
      for (const auto& st : inst.steps()) {
        StepStatus ss = st.status();
        if (ss == StepStatus::kStarted || ss == StepStatus::kUnknown ||
            (ss == StepStatus::kNeedsReview && !st.machine.reviewing_compensation()))
          return FailedPrecondition("step '" + st.name +
                                    "' has an unknown outcome; resolve it before compensating");
      }
      SagaDefinitionPtr def = Definition(inst.saga(), inst.saga_version());
      if (!def) return Internal("definition of " + inst.saga() + " is not registered");
      for (size_t i = 0; i < inst.steps().size(); ++i)
        if (def->steps[i].irreversible && inst.step(i).status() == StepStatus::kCommitted)
          return FailedPrecondition("cannot undo '" + def->steps[i].name +
                                    "': it is irreversible and committed; the saga can only "
                                    "go forward (resolve, retry or skip its steps)");
      for (size_t i = 0; i < inst.steps().size(); ++i)
        if (inst.step(i).status() == StepStatus::kAwaitingApproval)
          SAGAD_RETURN_IF_ERROR(tx.Step(static_cast<int>(i), StepEvent::kReject,
                                        {{"by", actor}, {"reason", "compensation forced"}}));
      return tx.Saga(SagaEvent::kStartCompensation,
                     {{"by", actor}, {"forced", true}, {"reason", "compensation forced: " + reason}});
    });
  }

  Status Resolve(const std::string& id, const std::string& step, const std::string& outcome,
                 const std::string& external_ref, const std::string& actor,
                 const std::string& comment) {
    if (outcome != "committed" && outcome != "not_executed")
      return InvalidArgument("outcome must be \"committed\" or \"not_executed\"");
    nlohmann::json resolution = {{"outcome", outcome}, {"by", actor}, {"comment", comment}};
    if (!external_ref.empty()) resolution["external_ref"] = external_ref;
    return OperatorAction(id, [&](Tx& tx) -> Status {
      int i = FindStep(tx.inst(), step);
      if (i < 0) return NotFound("instance " + id + " has no step '" + step + "'");
      if (tx.inst().status() != SagaStatus::kNeedsReview)
        return FailedPrecondition("instance " + id + " is not in NEEDS_REVIEW (it is " +
                                  SagaStatusName(tx.inst().status()) + ")");
      if (StepUnderWay(id, i))
        return FailedPrecondition("step '" + step +
                                  "' has a request in flight; its outcome will be recorded "
                                  "when it returns");
      const StepState& st = tx.inst().step(i);
      if (st.status() == StepStatus::kStarted || st.status() == StepStatus::kUnknown)
        SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kEscalate, {{"error", "operator review"}}));
      if (tx.inst().step(i).status() != StepStatus::kNeedsReview)
        return FailedPrecondition("step '" + step + "' has no unknown outcome to resolve (it is " +
                                  StepStatusName(tx.inst().step(i).status()) + ")");
      bool comp = tx.inst().step(i).machine.reviewing_compensation();
      if (outcome == "committed") {
        if (comp) {
          SAGAD_RETURN_IF_ERROR(
              tx.Step(i, StepEvent::kCompensationDone, {{"resolution", resolution}}));
        } else {
          nlohmann::json result = {{"resolved_by_operator", true}};
          if (!external_ref.empty()) result["ref"] = external_ref;
          SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kCommit,
                                        {{"result", result},
                                         {"external_ref", external_ref},
                                         {"resolution", resolution}}));
        }
      } else {
        SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kNotExecuted, {{"resolution", resolution}}));
      }
      return tx.Saga(SagaEvent::kResume, {{"by", actor}, {"step", step}});
    });
  }

 private:
  // ---- scheduling ----
  void Schedule(const std::string& id) {
    {
      std::lock_guard<std::mutex> l(sched_mu_);
      if (stopping_) return;
      if (running_.count(id)) {
        rerun_.insert(id);
        return;
      }
      running_.insert(id);
    }
    boost::asio::post(pool_, [this, id] { DriveLoop(id); });
  }

  void ScheduleAfter(const std::string& id, int64_t delay_ms) {
    auto timer = std::make_shared<boost::asio::steady_timer>(io_);
    timer->expires_after(std::chrono::milliseconds(delay_ms));
    timer->async_wait([this, id, timer](const boost::system::error_code& ec) {
      if (!ec) Schedule(id);
    });
  }

  void DriveLoop(const std::string& id) {
    while (true) {
      bool yield = false;
      try {
        yield = Drive(id);
      } catch (const std::exception& e) {
        // A bug, not an expected failure: say so loudly and try again later
        // rather than leave the instance without a driver.
        Log({{"msg", "driver error"}, {"instance", id}, {"error", e.what()}});
        ScheduleAfter(id, 5000);
      }
      std::lock_guard<std::mutex> l(sched_mu_);
      if (yield && !stopping_) {  // to the back of the queue, still running
        rerun_.erase(id);
        boost::asio::post(pool_, [this, id] { DriveLoop(id); });
        return;
      }
      if (!stopping_ && rerun_.erase(id)) continue;
      rerun_.erase(id);
      running_.erase(id);
      if (running_.empty() && step_tasks_ == 0) idle_cv_.notify_all();
      return;
    }
  }

  bool Stopping() {
    std::lock_guard<std::mutex> l(sched_mu_);
    return stopping_;
  }

  // Runs the instance's saga-level transitions (completion, turning back,
  // waiting for a human) and launches its step actions, each on a worker of
  // its own (several branches of a graph at once); a step action that ends
  // schedules the instance again. While a recovery is under way, returns
  // true after each saga-level action: the caller puts the instance back at
  // the end of the queue, so every recovered instance is resumed before any
  // runs to its end.
  bool Drive(const std::string& id) {
    for (int round = 0; round < 10000 && !Stopping(); ++round) {
      if (round > 0) {
        // Owned at the previous round and not now: it finished (a terminal
        // commit gives the lease up) or another process took it. Either way
        // there is nothing more to do here.
        if (!OwnedLease(id)) return false;
      } else if (!EnsureOwned(id)) {  // another live process drives it
        ForgetRecovery(id);
        return false;
      }
      auto inst = Load(id);
      if (!inst.ok()) {
        Log({{"msg", "cannot load instance"}, {"instance", id}, {"error", inst.status().ToString()}});
        ForgetRecovery(id);
        return false;
      }
      SagaDefinitionPtr def = Definition((*inst)->saga(), (*inst)->saga_version());
      if (!def) {
        // Never run an instance under a definition other than the one it
        // started with: a human decides.
        std::string why = "saga " + (*inst)->saga() + " version " +
                          std::to_string((*inst)->saga_version()) +
                          " is not registered in this coordinator";
        Log({{"msg", "definition not registered"}, {"instance", id}, {"saga", (*inst)->saga()}});
        SagaStatus ss = (*inst)->status();
        if (ss == SagaStatus::kRunning || ss == SagaStatus::kAwaitingApproval ||
            ss == SagaStatus::kCompensating)
          Transition(id, [&](Tx& tx) { return tx.Saga(SagaEvent::kEscalate, {{"reason", why}}); });
        MarkRecovered(id);
        return false;
      }
      Next next = Next::kStop;
      int64_t wake_at = 0;  // a deadline still ahead, for when the saga waits
      if (Deadlines(id, *def, **inst, &next, &wake_at)) {
        MarkRecovered(id);
        if (next == Next::kStop) return false;
        continue;
      }
      std::vector<Action> actions = NextActions(*def, **inst);
      const Action a = actions.front();
      if (a.kind == ActionKind::kRequestApproval || IsStepAction(a.kind)) {
        if (HasApprovalRequest(actions)) {
          next = Transition(id, [&](Tx& tx) { return RequestApprovals(tx, *def, actions); });
          MarkRecovered(id);
          if (next == Next::kStop) return false;
          continue;
        }
        Action here;
        if (!LaunchSteps(id, *def, **inst, actions, wake_at, &here)) {
          MarkRecovered(id);
          return false;
        }
        if (here.kind == ActionKind::kNone) return false;  // the workers carry on
        // A plain list runs its one step action in this driver (no hand-off
        // to another worker, as before graphs); so does any saga in recovery.
        next = Next::kStop;
        try {
          next = RunStep(id, here);
        } catch (...) {
          UnmarkStep(id, here.step);
          throw;
        }
        UnmarkStep(id, here.step);
        MarkRecovered(id);
        if (next == Next::kStop) return false;
        if (RecoveryInProgress()) return true;
        continue;
      }
      switch (a.kind) {
        case ActionKind::kNone:
          if (wake_at > 0) WakeAt(id, wake_at);
          MarkRecovered(id);
          return false;
        case ActionKind::kStartCompensation:
          next = Transition(id, [&](Tx& tx) {
            return GiveUp(tx, *def, "step '" + def->steps[a.step].name + "' failed");
          });
          break;
        case ActionKind::kComplete:
          next = Transition(id, [&](Tx& tx) { return tx.Saga(SagaEvent::kComplete); });
          break;
        case ActionKind::kFinishCompensation:
          next = Transition(id, [&](Tx& tx) { return tx.Saga(SagaEvent::kFinishCompensation); });
          break;
        case ActionKind::kAwaitApproval:
          next = Transition(id, [&](Tx& tx) -> Status {
            if (NextAction(*def, tx.inst()).kind != ActionKind::kAwaitApproval)
              return FailedPrecondition("moved on");
            return tx.Saga(SagaEvent::kWaitForApproval);
          });
          break;
        case ActionKind::kEscalate:
          next = Transition(id, [&](Tx& tx) -> Status {
            if (NextAction(*def, tx.inst()).kind != ActionKind::kEscalate)
              return FailedPrecondition("moved on");
            const StepState& st = tx.inst().step(a.step);
            bool undo = st.machine.reviewing_compensation();
            return tx.Saga(SagaEvent::kEscalate,
                           {{"reason", (undo ? "compensation of '" : "step '") + st.name +
                                           "' needs review: " +
                                           (undo ? st.comp_last_error : st.last_error)},
                            {"step", st.name}});
          });
          break;
        default:
          return false;
      }
      MarkRecovered(id);
      if (next == Next::kStop) return false;
      if (RecoveryInProgress()) return true;
    }
    return false;
  }

  static bool HasApprovalRequest(const std::vector<Action>& actions) {
    for (const Action& a : actions)
      if (a.kind == ActionKind::kRequestApproval) return true;
    return false;
  }

  // Records AWAITING_APPROVAL for each step that asks for it; the saga waits
  // for a human too once nothing else can run (an independent branch goes on).
  Status RequestApprovals(Tx& tx, const SagaDefinition& def, const std::vector<Action>& actions) {
    for (const Action& a : actions) {
      if (a.kind != ActionKind::kRequestApproval) continue;
      if (tx.inst().status() != SagaStatus::kRunning ||
          tx.inst().step(a.step).status() != StepStatus::kPlanned)
        return FailedPrecondition("moved on");
      SAGAD_RETURN_IF_ERROR(tx.Step(a.step, StepEvent::kRequestApproval));
    }
    if (NextAction(def, tx.inst()).kind == ActionKind::kAwaitApproval)
      return tx.Saga(SagaEvent::kWaitForApproval);
    return Status::Ok();
  }

  // Starts each step action not already under way in this process, within
  // the saga's max_parallel; one waiting on a durable timer is woken at its
  // time. True if any was launched. For a plain list (one step at a time),
  // and for every saga while a recovery is under way, the first action is
  // marked but not posted: *here is it, for the caller to run. (Posted to
  // the back of a queue of thousands of recovered instances, the actions of
  // the instances at its front would wait until the next SIGKILL, every time.)
  bool LaunchSteps(const std::string& id, const SagaDefinition& def, const Instance& inst,
                   const std::vector<Action>& actions, int64_t wake_at, Action* here) {
    *here = Action{};
    const bool chain = IsChain(def) || RecoveryInProgress();
    const int64_t now = clock_.NowMillis();
    int64_t wake = wake_at;
    bool launched = false;
    for (const Action& a : actions) {
      if (!IsStepAction(a.kind)) continue;
      int64_t due = inst.step(a.step).retry_at;
      if (due > now) {
        wake = wake == 0 ? due : std::min(wake, due);
        continue;
      }
      if (!TryMarkStep(id, a.step, def.max_parallel)) continue;
      launched = true;
      if (chain && here->kind == ActionKind::kNone) {
        *here = a;
        continue;
      }
      boost::asio::post(pool_, [this, id, a] { RunStepTask(id, a); });
    }
    if (wake > 0) WakeAt(id, wake);
    return launched;
  }

  // One step action on a worker of its own. Its step is marked as under way
  // (TryMarkStep) until it ends; then the instance is planned again.
  void RunStepTask(const std::string& id, Action a) {
    Next next = Next::kStop;
    try {
      next = RunStep(id, a);
    } catch (const std::exception& e) {
      Log({{"msg", "step task error"}, {"instance", id}, {"error", e.what()}});
      ScheduleAfter(id, 5000);
    }
    UnmarkStep(id, a.step);
    MarkRecovered(id);
    // Not owned any more: it finished (a terminal commit gives the lease up)
    // or another process took it; either way nothing is left to do here.
    if (next == Next::kContinue && OwnedLease(id)) Schedule(id);
  }

  Next RunStep(const std::string& id, const Action& a) {
    if (Stopping() || !OwnedLease(id)) return Next::kStop;
    auto inst = Load(id);
    if (!inst.ok()) return Next::kContinue;  // the driver says why
    SagaDefinitionPtr def = Definition((*inst)->saga(), (*inst)->saga_version());
    if (!def) return Next::kContinue;
    // Still wanted? The instance may have moved on since it was planned.
    bool wanted = false;
    for (const Action& b : NextActions(*def, **inst))
      wanted = wanted || (b.kind == a.kind && b.step == a.step);
    if (!wanted) return Next::kContinue;
    switch (a.kind) {
      case ActionKind::kExecute: return Execute(id, *def, **inst, a.step);
      case ActionKind::kReconcile: return Reconcile(id, *def, **inst, a.step);
      case ActionKind::kCompensate: return Compensate(id, *def, **inst, a.step);
      case ActionKind::kReconcileCompensation:
        return ReconcileCompensation(id, *def, **inst, a.step);
      default: return Next::kContinue;
    }
  }

  // ---- steps under way in this process ----
  // A step is marked before its STARTED record can be seen (the mark is
  // taken before the commit) and unmarked after its outcome was recorded, so
  // no other worker ever reconciles or re-sends a request still in flight.
  // At most `limit` steps of one instance at once.
  bool TryMarkStep(const std::string& id, int step, int limit) {
    std::lock_guard<std::mutex> l(sched_mu_);
    auto& steps = steps_running_[id];
    if (steps.count(step) || static_cast<int>(steps.size()) >= limit) {
      if (steps.empty()) steps_running_.erase(id);
      return false;
    }
    steps.insert(step);
    ++step_tasks_;
    return true;
  }

  void UnmarkStep(const std::string& id, int step) {
    std::lock_guard<std::mutex> l(sched_mu_);
    auto it = steps_running_.find(id);
    if (it == steps_running_.end() || !it->second.erase(step)) return;
    if (it->second.empty()) steps_running_.erase(it);
    if (--step_tasks_ == 0 && running_.empty()) idle_cv_.notify_all();
  }

  bool StepUnderWay(const std::string& id, int step) {
    std::lock_guard<std::mutex> l(sched_mu_);
    auto it = steps_running_.find(id);
    return it != steps_running_.end() && it->second.count(step);
  }

  // Schedules the instance at wall time `due_ms` unless a wake-up at or
  // before it is already pending.
  void WakeAt(const std::string& id, int64_t due_ms) {
    const int64_t now = clock_.NowMillis();
    {
      std::lock_guard<std::mutex> l(sched_mu_);
      auto it = wakes_.find(id);
      if (it != wakes_.end() && it->second <= due_ms && it->second > now) return;
      wakes_[id] = due_ms;
    }
    auto timer = std::make_shared<boost::asio::steady_timer>(io_);
    timer->expires_after(std::chrono::milliseconds(std::max<int64_t>(1, due_ms - now)));
    timer->async_wait([this, id, due_ms, timer](const boost::system::error_code& ec) {
      {
        std::lock_guard<std::mutex> l(sched_mu_);
        auto it = wakes_.find(id);
        if (it != wakes_.end() && it->second == due_ms) wakes_.erase(it);
      }
      if (!ec) Schedule(id);
    });
  }

  // Saga deadline and approval timeouts. True if it acted (`next` says how
  // to go on); otherwise *wake_at is the nearest deadline still ahead (or 0).
  bool Deadlines(const std::string& id, const SagaDefinition& def, const Instance& inst,
                 Next* next, int64_t* wake_at) {
    SagaStatus ss = inst.status();
    if (ss != SagaStatus::kRunning && ss != SagaStatus::kAwaitingApproval) return false;
    const int64_t now = clock_.NowMillis();
    int64_t wake = 0;
    if (def.deadline_ms > 0 && !PivotCommitted(def, inst)) {
      int64_t due = inst.created_at() + def.deadline_ms;
      if (now >= due) {
        *next = Transition(id, [&](Tx& tx) -> Status {
          for (size_t i = 0; i < tx.inst().steps().size(); ++i)
            if (tx.inst().step(i).status() == StepStatus::kAwaitingApproval)
              SAGAD_RETURN_IF_ERROR(tx.Step(static_cast<int>(i), StepEvent::kReject,
                                            {{"by", "sagad"}, {"reason", "saga deadline passed"}}));
          return tx.Saga(SagaEvent::kStartCompensation,
                         {{"reason", "saga deadline of " + std::to_string(def.deadline_ms) +
                                         " ms passed"}});
        });
        return true;
      }
      wake = due;
    }
    for (size_t i = 0; i < inst.steps().size(); ++i) {
      const StepState& st = inst.step(i);
      if (st.status() != StepStatus::kAwaitingApproval) continue;
      const StepDefinition& sd = def.steps[i];
      int64_t due = ApprovalDeadline(sd, st.approval_requested_at);
      if (due == 0) continue;
      if (now < due) {
        wake = wake == 0 ? due : std::min(wake, due);
        continue;
      }
      std::string why = "approval of '" + sd.name + "' timed out after " +
                        std::to_string(sd.approval_timeout_ms) + " ms";
      *next = Transition(id, [&](Tx& tx) -> Status {
        if (tx.inst().step(i).status() != StepStatus::kAwaitingApproval)
          return FailedPrecondition("decided meanwhile");
        if (sd.approval_timeout_action == "escalate")
          return tx.Saga(SagaEvent::kEscalate, {{"reason", why}, {"step", sd.name}});
        SAGAD_RETURN_IF_ERROR(tx.Step(static_cast<int>(i), StepEvent::kReject,
                                      {{"by", "sagad"}, {"reason", why}}));
        return tx.Saga(SagaEvent::kStartCompensation, {{"reason", why}});
      });
      return true;
    }
    *wake_at = wake;
    return false;
  }

  // The first action of an instance found at start-up is done (or it needs
  // none): its recovery latency is known.
  // Round robin (and no chaining) while instances found at start-up wait to
  // be resumed; bounded in time so that an instance that is somehow never
  // marked cannot keep this process in that mode.
  bool RecoveryInProgress() {
    std::lock_guard<std::mutex> l(recovery_mu_);
    return !recovering_.empty() &&
           clock_.SteadyNow() - recovery_start_ < std::chrono::seconds(60);
  }
  // An instance this process will not resume (owned elsewhere, unreadable).
  void ForgetRecovery(const std::string& id) {
    std::lock_guard<std::mutex> l(recovery_mu_);
    recovering_.erase(id);
  }

  void MarkRecovered(const std::string& id) {
    std::lock_guard<std::mutex> l(recovery_mu_);
    if (recovering_.empty() || !recovering_.erase(id)) return;
    double secs = std::chrono::duration<double>(clock_.SteadyNow() - recovery_start_).count();
    metrics_.Observe("sagad_recovery_latency_seconds", secs);
    Log({{"msg", "recovered"}, {"instance", id}, {"ms", secs * 1000}});
  }

  // A transition the driver wants; on a lost race it simply plans again.
  Next Transition(const std::string& id, const std::function<Status(Tx&)>& fn) {
    Status s = Mutate(id, fn, /*as_owner=*/true);
    return s.ok() ? Next::kContinue : AfterFailedMutate(id, s);
  }

  // A driver transition that did not commit: a lost race means plan again;
  // anything else is storage trouble, retried later.
  Next AfterFailedMutate(const std::string& id, const Status& s) {
    if (s.code() == StatusCode::kFailedPrecondition && s.message().rfind("lease lost", 0) == 0)
      return Next::kStop;  // another process owns it now: no further calls from here
    if (s.code() == StatusCode::kFailedPrecondition) return Next::kContinue;
    Log({{"msg", "transition failed"}, {"instance", id}, {"error", s.ToString()}});
    ScheduleAfter(id, 1000);
    return Next::kStop;
  }

  // Definite failure of the forward path (failure policy): compensate before
  // the pivot, review after it (nothing can be undone any more).
  Status GiveUp(Tx& tx, const SagaDefinition& def, const std::string& reason) {
    if (tx.inst().status() != SagaStatus::kRunning) return Status::Ok();
    if (OnDefiniteFailure(PivotCommitted(def, tx.inst())) == FailureDecision::kReview)
      return tx.Saga(SagaEvent::kEscalate,
                     {{"reason", reason + " after the irreversible step committed"}});
    // A branch waiting for approval will not run now: its request is withdrawn.
    for (size_t i = 0; i < tx.inst().steps().size(); ++i)
      if (tx.inst().step(i).status() == StepStatus::kAwaitingApproval)
        SAGAD_RETURN_IF_ERROR(tx.Step(static_cast<int>(i), StepEvent::kReject,
                                      {{"by", "sagad"}, {"reason", "not needed: " + reason}}));
    return tx.Saga(SagaEvent::kStartCompensation, {{"reason", reason}});
  }

  // The undo of one step went to review. The others go on (only its
  // ancestors wait for it); the saga follows once nothing else can be undone.
  Status EscalateUndo(Tx& tx, const SagaDefinition& def, const std::string& reason,
                      const std::string& step) {
    for (const Action& a : NextActions(def, tx.inst()))
      if (IsStepAction(a.kind)) return Status::Ok();
    return tx.Saga(SagaEvent::kEscalate, {{"reason", reason}, {"step", step}});
  }

  Status Escalate(Tx& tx, int i, const std::string& reason) {
    const StepState& st = tx.inst().step(i);
    if (st.status() != StepStatus::kNeedsReview && st.status() != StepStatus::kCommitted &&
        st.status() != StepStatus::kPlanned)
      SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kEscalate, {{"error", reason}}));
    if (tx.inst().status() == SagaStatus::kNeedsReview) return Status::Ok();
    return tx.Saga(SagaEvent::kEscalate, {{"reason", reason}, {"step", st.name}});
  }

  TemplateContext Context(const Instance& inst) {
    TemplateContext ctx;
    ctx.input = &inst.input();
    for (const auto& st : inst.steps())
      if (!st.result.is_null() || !st.external_ref.empty())
        ctx.steps[st.name] = {{"ref", st.external_ref}, {"result", st.result}};
    return ctx;
  }

  struct Rendered {
    std::string path;
    nlohmann::json body;
    std::string hash;
  };

  StatusOr<Rendered> Render(const Instance& inst, const CallSpec& call) {
    TemplateContext ctx = Context(inst);
    auto path = RenderPath(call.path, ctx);
    if (!path.ok()) return path.status();
    auto body = RenderBody(call.body, ctx);
    if (!body.ok()) return body.status();
    Rendered r{*path, *body, Sha256Hex(call.method + " " + *path + "\n" + CanonicalJson(*body))};
    return r;
  }

  double Random() {
    std::lock_guard<std::mutex> l(rng_mu_);
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }

  // The trace an instance's downstream calls continue.
  static TraceContext TraceOf(const Instance& inst) { return TraceContext::FromJson(inst.trace()); }

  // ---- per-step policy ----
  RetryPolicy RetryFor(const StepDefinition& sd, const std::string& service) {
    const ServiceConfig* svc = adapter_.Service(service);
    return EffectiveRetry(sd, svc ? svc->retry : RetryPolicy{});
  }
  bool QueryableFor(const StepDefinition& sd, const ServiceConfig& svc) {
    return sd.queryable.value_or(svc.queryable);
  }
  bool IdempotentFor(const StepDefinition& sd, const ServiceConfig& svc) {
    return sd.idempotent.value_or(svc.idempotent);
  }

  // Retry budget: a re-send takes a token from the service's bucket. Returns
  // 0 if it may go now, else the wait in milliseconds.
  int64_t TakeRetryToken(const std::string& service) {
    const ServiceConfig* svc = adapter_.Service(service);
    std::lock_guard<std::mutex> l(budget_mu_);
    int64_t now = clock_.NowMillis();
    auto it = budgets_.find(service);
    if (it == budgets_.end())
      it = budgets_.emplace(service, RetryBudget(svc ? svc->retry_budget : RetryBudgetConfig{}, now))
               .first;
    if (it->second.TryTake(now)) return 0;
    metrics_.Inc("sagad_retry_budget_exhausted_total", "service=\"" + service + "\"");
    return std::max<int64_t>(1, it->second.WaitMillis(now));
  }

  // Defers a re-send of step i for `wait` ms because the budget is empty.
  Next DeferRetry(const std::string& id, int i, const std::string& service, int64_t wait) {
    return Transition(id, [&](Tx& tx) {
      return tx.Note(i, "retry_deferred",
                     {{"service", service}, {"reason", "retry budget of the service is empty"},
                      {"retry_at", clock_.NowMillis() + wait}});
    });
  }

  // The args hash a step's key is bound to: that of its first send, else
  // that of its approval ("" if neither).
  static std::string BoundArgsHash(const StepState& st) {
    if (!st.args_hash.empty()) return st.args_hash;
    return st.approval.is_object() ? st.approval.value("args_hash", "") : "";
  }

  // ---- forward ----
  Next Execute(const std::string& id, const SagaDefinition& def, const Instance& inst, int i) {
    const StepDefinition& sd = def.steps[i];
    const StepState& st = inst.step(i);
    const ServiceConfig* svc = adapter_.Service(sd.forward.service);
    auto r = Render(inst, sd.forward);
    if (!svc || !r.ok()) {
      std::string why = !svc ? "service '" + sd.forward.service + "' is not configured"
                             : "cannot build request: " + r.status().message();
      return Transition(id, [&](Tx& tx) -> Status {
        if (tx.inst().step(i).status() != StepStatus::kPlanned) return Escalate(tx, i, why);
        return GiveUp(tx, def, "step '" + sd.name + "': " + why);
      });
    }
    const std::string key = id + ":" + sd.name;
    std::string bound = BoundArgsHash(st);
    if (!bound.empty() && bound != r->hash) {
      return Transition(id, [&](Tx& tx) {
        return Escalate(tx, i, "idempotency key " + key +
                                   " would be sent with a different body than it is bound to "
                                   "(first send or approval); refusing");
      });
    }
    if (st.attempts > 0 || st.retries > 0) {
      int64_t wait = TakeRetryToken(sd.forward.service);
      if (wait > 0) return DeferRetry(id, i, sd.forward.service, wait);
    }
    CrashPoint("before_started");
    Status s = Mutate(id, [&](Tx& tx) -> Status {
      const Instance& cur = tx.inst();
      StepStatus ss = cur.step(i).status();
      if (!IsRetryableSendState(ss)) return FailedPrecondition("step moved on");
      if (ss == StepStatus::kPlanned && cur.status() != SagaStatus::kRunning)
        return FailedPrecondition("saga is no longer running");
      return tx.Step(i, StepEvent::kStart,
                     {{"key", key}, {"args_hash", r->hash}, {"attempt", cur.step(i).attempts + 1}});
    }, /*as_owner=*/true);
    if (!s.ok()) return AfterFailedMutate(id, s);
    CrashPoint("after_started");
    return SendForward(id, def, i, std::move(*r), st.attempts + 1,
                       TraceOf(inst));
  }

  // The STARTED record of step i is durable: send it, record the outcome.
  // When the step committed and the next step may go at once, its STARTED
  // record rides in the same commit (Chain) and the loop sends it: one
  // commit, one fsync per step instead of two. Step i was marked as under
  // way by whoever launched this; a chained step is marked by Chain and
  // unmarked here once its outcome is recorded.
  Next SendForward(const std::string& id, const SagaDefinition& def, int i, Rendered r,
                   int attempt, const TraceContext& trace) {
    const int launched = i;
    const bool chain_only = IsChain(def);
    while (true) {
      const StepDefinition& sd = def.steps[i];
      const std::string key = id + ":" + sd.name;
      CallRequest req{sd.forward.service, sd.forward.method, r.path, r.body, key, id, sd.name,
                      Token(id), attempt, trace};
      auto t0 = std::chrono::steady_clock::now();
      CallResult res = adapter_.Call(req);
      CrashPoint("before_outcome");
      MarkRecovered(id);  // resumed: its first step after a restart was sent
      RecordCall("forward", res, std::chrono::steady_clock::now() - t0);
      Log({{"msg", "step call"}, {"instance", id}, {"trace_id", trace.trace_id},
           {"step", sd.name}, {"key", key},
           {"attempt", attempt}, {"outcome", OutcomeName(res.outcome)},
           {"http_status", res.http_status},
           {"ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t0).count()}});
      const RetryPolicy policy = RetryFor(sd, sd.forward.service);
      int chained = -1, marked = -1;
      Rendered chained_request;
      Next next = Transition(id, [&](Tx& tx) -> Status {
        chained = -1;
        switch (res.outcome) {
          case Outcome::kCommitted:
            SAGAD_RETURN_IF_ERROR(
                tx.Step(i, StepEvent::kCommit,
                        {{"result", res.result}, {"external_ref", res.external_ref},
                         {"http_status", res.http_status}, {"replayed", res.replayed}}));
            SAGAD_RETURN_IF_ERROR(Chain(tx, def, &marked, &chained, &chained_request));
            if (chained >= 0) CrashPoint("before_started");  // the next STARTED is not durable yet
            return Status::Ok();
          case Outcome::kFailed:
            SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kFail,
                                          {{"error", res.error}, {"http_status", res.http_status}}));
            return GiveUp(tx, def, "step '" + sd.name + "' was rejected: " + res.error);
          case Outcome::kUnknown:
            return tx.Step(i, StepEvent::kOutcomeUnknown,
                           {{"error", res.error}, {"http_status", res.http_status}});
          case Outcome::kNotExecuted: {
            const StepState& cur = tx.inst().step(i);
            int64_t now = clock_.NowMillis();
            if (!MayRetry(sd, policy, cur.retries + 1, cur.first_sent_at, now)) {
              SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kNotExecuted, {{"error", res.error}}));
              return GiveUp(tx, def, "step '" + sd.name + "' could not be sent after " +
                                         std::to_string(cur.retries) + " attempts: " + res.error);
            }
            return tx.Step(i, StepEvent::kNotExecuted,
                           {{"error", res.error},
                            {"retry_at", now + BackoffMillis(policy, cur.retries + 1,
                                                             [this] { return Random(); })}});
          }
        }
        return Status::Ok();
      });
      CrashPoint("after_outcome");
      if (marked >= 0 && (next == Next::kStop || chained != marked)) UnmarkStep(id, marked);
      if (i != launched) UnmarkStep(id, i);
      if (next == Next::kStop || chained < 0) return next;
      CrashPoint("after_started");
      if (!chain_only) Schedule(id);  // siblings that became ready start beside it
      i = chained;
      r = std::move(chained_request);
      attempt = 1;
    }
  }

  // Folds into tx, after a step committed, what follows without any call:
  // the saga's completion, or the STARTED record of the next step when it
  // is a first send that may go now (no approval, no timer, no deadline
  // due). *step is that step (else -1) and *request its rendered request.
  // Anything else is left to the driver's next round. The chained step is
  // marked as under way before the commit (*marked; kept across retries of
  // the transition).
  Status Chain(Tx& tx, const SagaDefinition& def, int* marked, int* step, Rendered* request) {
    const Instance& inst = tx.inst();
    std::vector<Action> actions = NextActions(def, inst);
    if (actions.front().kind == ActionKind::kComplete) return tx.Saga(SagaEvent::kComplete);
    if (RecoveryInProgress()) return Status::Ok();  // others wait to be resumed first
    if (inst.status() != SagaStatus::kRunning) return Status::Ok();
    if (def.deadline_ms > 0 && !PivotCommitted(def, inst) &&
        clock_.NowMillis() >= inst.created_at() + def.deadline_ms)
      return Status::Ok();
    for (const Action& a : actions) {
      if (a.kind != ActionKind::kExecute) continue;
      const StepState& st = inst.step(a.step);
      if (st.status() != StepStatus::kPlanned || st.attempts > 0 || st.retries > 0 ||
          st.retry_at > 0)
        continue;
      const StepDefinition& sd = def.steps[a.step];
      if (!adapter_.Service(sd.forward.service)) continue;
      auto r = Render(inst, sd.forward);
      if (!r.ok()) continue;
      std::string bound = BoundArgsHash(st);
      if (!bound.empty() && bound != r->hash) continue;
      if (a.step != *marked) {
        // The step that just committed still counts until it is unmarked.
        if (!TryMarkStep(inst.id(), a.step, def.max_parallel + 1)) continue;
        if (*marked >= 0) UnmarkStep(inst.id(), *marked);
        *marked = a.step;
      }
      SAGAD_RETURN_IF_ERROR(tx.Step(a.step, StepEvent::kStart,
                                    {{"key", inst.id() + ":" + sd.name},
                                     {"args_hash", r->hash},
                                     {"attempt", 1}}));
      *step = a.step;
      *request = std::move(*r);
      return Status::Ok();
    }
    return Status::Ok();
  }

  // Each step depends on exactly the one before it (a plain list).
  static bool IsChain(const SagaDefinition& def) {
    for (size_t i = 0; i < def.steps.size(); ++i) {
      auto deps = def.DependencyNames(i);
      if (i == 0 ? !deps.empty() : deps.size() != 1 || deps[0] != def.steps[i - 1].name)
        return false;
    }
    return true;
  }

  Next Reconcile(const std::string& id, const SagaDefinition& def, const Instance& inst, int i) {
    const StepDefinition& sd = def.steps[i];
    const StepState& st = inst.step(i);
    const ServiceConfig* svc = adapter_.Service(sd.forward.service);
    if (!svc) {
      return Transition(id, [&](Tx& tx) {
        return Escalate(tx, i, "outcome unknown and service '" + sd.forward.service +
                                   "' is not configured");
      });
    }
    if (!QueryableFor(sd, *svc)) {
      if (IdempotentFor(sd, *svc)) return Execute(id, def, inst, i);  // same key: deduplicated
      return Transition(id, [&](Tx& tx) {
        return Escalate(tx, i, "outcome of " + st.key +
                                   " is unknown and the service can neither be asked nor "
                                   "deduplicates; a human must check");
      });
    }
    QueryResult q = adapter_.Query(sd.forward.service, st.key, id, Token(id), st.attempts,
                                   TraceOf(inst));
    RecordQuery("forward", q);
    Log({{"msg", "reconcile"}, {"instance", id}, {"step", sd.name}, {"key", st.key},
         {"answer", q.outcome == QueryOutcome::kHappened      ? "happened"
                    : q.outcome == QueryOutcome::kNotHappened ? "not_happened"
                                                              : "unknown"}});
    const RetryPolicy policy = RetryFor(sd, sd.forward.service);
    if (q.outcome == QueryOutcome::kNotHappened) {
      // It never happened: back to PLANNED. Running, it is sent again with the
      // same key after a backoff, within max_attempts sends (a downstream that
      // keeps answering unclearly is not hammered); turning back, there is
      // nothing to send or undo.
      return Transition(id, [&](Tx& tx) -> Status {
        const StepState& cur = tx.inst().step(i);
        if (cur.status() != StepStatus::kStarted && cur.status() != StepStatus::kUnknown)
          return FailedPrecondition("step moved on");
        const std::string why = "confirmed not executed after: " + cur.last_error;
        if (tx.inst().status() != SagaStatus::kRunning)
          return tx.Step(i, StepEvent::kNotExecuted, {{"error", "confirmed not executed"}});
        int64_t now = clock_.NowMillis();
        if (!MayRetry(sd, policy, cur.attempts, cur.first_sent_at, now)) {
          SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kNotExecuted, {{"error", why}}));
          return GiveUp(tx, def, "step '" + sd.name + "' did not take effect in " +
                                     std::to_string(cur.attempts) + " attempts: " + why);
        }
        return tx.Step(i, StepEvent::kNotExecuted,
                       {{"error", why},
                        {"retry_at", now + BackoffMillis(policy, cur.attempts,
                                                         [this] { return Random(); })}});
      });
    }
    return Transition(id, [&](Tx& tx) -> Status {
      StepStatus ss = tx.inst().step(i).status();
      if (ss != StepStatus::kStarted && ss != StepStatus::kUnknown)
        return FailedPrecondition("step moved on");
      if (q.outcome == QueryOutcome::kHappened)
        return tx.Step(i, StepEvent::kCommit,
                       {{"result", q.result}, {"external_ref", q.external_ref},
                        {"reconciled", true}});
      if (ss == StepStatus::kStarted)
        SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kOutcomeUnknown, {{"error", q.error}}));
      int n = tx.inst().step(i).reconciliations + 1;
      if (n >= policy.max_reconciliations) {
        SAGAD_RETURN_IF_ERROR(tx.Note(i, "reconciled", {{"phase", "forward"}, {"error", q.error}}));
        return Escalate(tx, i, "outcome of " + st.key + " still unknown after " +
                                   std::to_string(n) + " reconciliation attempts: " + q.error);
      }
      return tx.Note(i, "reconciled",
                     {{"phase", "forward"}, {"error", q.error},
                      {"retry_at", clock_.NowMillis() +
                                       ReconcileDelayMillis(policy, n, [this] { return Random(); })}});
    });
  }

  // ---- compensation ----
  Next Compensate(const std::string& id, const SagaDefinition& def, const Instance& inst, int i) {
    const StepDefinition& sd = def.steps[i];
    const StepState& st = inst.step(i);
    if (!sd.compensation) {
      return Transition(id, [&](Tx& tx) {
        return Escalate(tx, i, "step '" + sd.name + "' committed but has no compensation");
      });
    }
    const CallSpec& call = *sd.compensation;
    auto r = Render(inst, call);
    if (!adapter_.Service(call.service) || !r.ok()) {
      std::string why = !r.ok() ? "cannot build compensation: " + r.status().message()
                                : "service '" + call.service + "' is not configured";
      return Transition(id, [&](Tx& tx) {
        return tx.Saga(SagaEvent::kEscalate, {{"reason", why}, {"step", sd.name}});
      });
    }
    const std::string key = id + ":" + sd.name + ":compensate";
    if (!st.comp_args_hash.empty() && st.comp_args_hash != r->hash) {
      return Transition(id, [&](Tx& tx) {
        return tx.Saga(SagaEvent::kEscalate,
                       {{"reason", "compensation key " + key +
                                       " would be re-sent with a different body; refusing"}});
      });
    }
    if (st.comp_attempts > 0) {
      int64_t wait = TakeRetryToken(call.service);
      if (wait > 0) return DeferRetry(id, i, call.service, wait);
    }
    CrashPoint("before_compensation_started");
    Status s = Mutate(id, [&](Tx& tx) -> Status {
      StepStatus ss = tx.inst().step(i).status();
      if (ss != StepStatus::kCommitted && ss != StepStatus::kCompensating)
        return FailedPrecondition("step moved on");
      return tx.Step(i, StepEvent::kBeginCompensation, {{"key", key}, {"args_hash", r->hash}});
    }, /*as_owner=*/true);
    if (!s.ok()) return AfterFailedMutate(id, s);
    CrashPoint("after_compensation_started");
    CallRequest req{call.service, call.method, r->path, r->body, key, id, sd.name, Token(id),
                    st.comp_attempts + 1, TraceOf(inst)};
    auto t0 = std::chrono::steady_clock::now();
    CallResult res = adapter_.Call(req);
    CrashPoint("before_compensation_outcome");
    RecordCall("compensation", res, std::chrono::steady_clock::now() - t0);
    Log({{"msg", "compensation call"}, {"instance", id}, {"trace_id", req.trace.trace_id},
         {"step", sd.name}, {"key", key},
         {"outcome", OutcomeName(res.outcome)}, {"http_status", res.http_status}});
    const RetryPolicy policy = RetryFor(sd, call.service);
    Next next = Transition(id, [&](Tx& tx) -> Status {
      switch (res.outcome) {
        case Outcome::kCommitted:
          return tx.Step(i, StepEvent::kCompensationDone, {{"result", res.result}});
        case Outcome::kFailed:
          SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kEscalate, {{"error", res.error}}));
          return EscalateUndo(tx, def,
                              "compensation of '" + sd.name + "' was refused: " + res.error,
                              sd.name);
        case Outcome::kUnknown:
          return tx.Step(i, StepEvent::kCompensationUnknown, {{"error", res.error}});
        case Outcome::kNotExecuted: {
          int n = tx.inst().step(i).comp_attempts;
          if (n >= policy.max_attempts) {
            SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kNotExecuted, {{"error", res.error}}));
            return tx.Saga(SagaEvent::kEscalate,
                           {{"reason", "compensation of '" + sd.name + "' could not be sent after " +
                                           std::to_string(n) + " attempts: " + res.error},
                            {"step", sd.name}});
          }
          return tx.Step(i, StepEvent::kNotExecuted,
                         {{"error", res.error},
                          {"retry_at", clock_.NowMillis() +
                                           BackoffMillis(policy, n, [this] { return Random(); })}});
        }
      }
      return Status::Ok();
    });
    CrashPoint("after_compensation_outcome");
    return next;
  }

  Next ReconcileCompensation(const std::string& id, const SagaDefinition& def,
                             const Instance& inst, int i) {
    const StepDefinition& sd = def.steps[i];
    const StepState& st = inst.step(i);
    const ServiceConfig* svc = sd.compensation ? adapter_.Service(sd.compensation->service) : nullptr;
    // Compensations are idempotent by contract: without a query, re-send.
    if (!svc || !QueryableFor(sd, *svc)) return Compensate(id, def, inst, i);
    QueryResult q = adapter_.Query(sd.compensation->service, st.comp_key, id, Token(id),
                                   st.comp_attempts, TraceOf(inst));
    RecordQuery("compensation", q);
    if (q.outcome == QueryOutcome::kNotHappened) return Compensate(id, def, inst, i);
    const RetryPolicy policy = RetryFor(sd, sd.compensation->service);
    return Transition(id, [&](Tx& tx) -> Status {
      if (tx.inst().step(i).status() != StepStatus::kCompensating)
        return FailedPrecondition("step moved on");
      if (q.outcome == QueryOutcome::kHappened)
        return tx.Step(i, StepEvent::kCompensationDone, {{"result", q.result}, {"reconciled", true}});
      if (!tx.inst().step(i).machine.compensation_in_doubt())
        SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kCompensationUnknown, {{"error", q.error}}));
      int n = tx.inst().step(i).comp_reconciliations + 1;
      if (n >= policy.max_reconciliations) {
        SAGAD_RETURN_IF_ERROR(
            tx.Note(i, "reconciled", {{"phase", "compensation"}, {"error", q.error}}));
        SAGAD_RETURN_IF_ERROR(tx.Step(i, StepEvent::kEscalate, {{"error", q.error}}));
        return EscalateUndo(tx, def,
                            "compensation " + st.comp_key + " still unknown after " +
                                std::to_string(n) + " reconciliation attempts",
                            sd.name);
      }
      return tx.Note(i, "reconciled",
                     {{"phase", "compensation"}, {"error", q.error},
                      {"retry_at", clock_.NowMillis() +
                                       ReconcileDelayMillis(policy, n, [this] { return Random(); })}});
    });
  }

  // ---- outbox ----
  // What others may care about, as outbox messages (empty without webhooks).
  std::vector<nlohmann::json> OutboxMessages(const Instance& inst, const std::vector<Event>& events) {
    std::vector<nlohmann::json> out;
    if (!options_.outbox) return out;
    static const std::set<std::string> kQuiet = {"started", "reconciled", "retry_deferred",
                                                 "compensation_started", "compensation_unknown",
                                                 "not_executed"};
    for (const Event& e : events) {
      if (kQuiet.count(e.type)) continue;
      nlohmann::json m = {{"id", inst.id() + ":" + std::to_string(e.seq)},
                          {"type", e.type},
                          {"instance_id", inst.id()},
                          {"saga", inst.saga()},
                          {"saga_version", inst.saga_version()},
                          {"seq", e.seq},
                          {"at", e.at_ms},
                          {"status", SagaStatusName(inst.status())}};
      if (!e.step.empty()) m["step"] = e.step;
      if (inst.trace().is_object()) m["trace_id"] = inst.trace().value("trace_id", "");
      for (const char* f : {"external_ref", "reason", "by", "error", "comment"})
        if (e.data.contains(f)) m[f] = e.data[f];
      out.push_back(std::move(m));
    }
    return out;
  }

  // ---- metrics ----
  void RecordCall(const char* phase, const CallResult& res, std::chrono::steady_clock::duration d) {
    metrics_.Inc("sagad_step_calls_total", std::string("phase=\"") + phase + "\",outcome=\"" +
                                               OutcomeName(res.outcome) + "\"");
    if (res.replayed) metrics_.Inc("sagad_duplicate_effects_detected_total");
    metrics_.Observe("sagad_step_latency_seconds", std::chrono::duration<double>(d).count());
  }
  // One write transaction (it holds LMDB's writer lock, fsync included).
  void RecordCommit(std::chrono::steady_clock::duration d) {
    double secs = std::chrono::duration<double>(d).count();
    metrics_.Observe("sagad_store_commit_seconds", secs);
    std::lock_guard<std::mutex> l(commit_max_mu_);
    max_commit_seconds_ = std::max(max_commit_seconds_, secs);
  }

  void RecordQuery(const char* phase, const QueryResult& q) {
    const char* answer = q.outcome == QueryOutcome::kHappened      ? "happened"
                         : q.outcome == QueryOutcome::kNotHappened ? "not_happened"
                                                                   : "unknown";
    metrics_.Inc("sagad_reconciliations_total",
                 std::string("phase=\"") + phase + "\",answer=\"" + answer + "\"");
  }

 public:
  std::string MetricsText() {
    std::string extra;
    auto active = store_.ListActive();
    if (active.ok()) {
      std::map<std::string, int> by;  // saga + status of every unfinished instance
      for (const auto& a : *active) ++by["saga=\"" + a.saga + "\",status=\"" + a.status + "\""];
      extra += "# HELP sagad_instances_active Instances not yet COMPLETED or COMPENSATED.\n"
               "# TYPE sagad_instances_active gauge\nsagad_instances_active " +
               std::to_string(active->size()) + "\n";
      extra += "# HELP sagad_instances Unfinished instances by saga and status.\n"
               "# TYPE sagad_instances gauge\n";
      for (const auto& [labels, n] : by)
        extra += "sagad_instances{" + labels + "} " + std::to_string(n) + "\n";
    }
    extra += "# HELP sagad_store_synced_commits_total Durable write transactions committed (LMDB: "
             "an fdatasync of the data file and a synchronous meta-page write each; PostgreSQL: "
             "one transaction and WAL flush each; group commit makes them fewer than transitions).\n"
             "# TYPE sagad_store_synced_commits_total counter\nsagad_store_synced_commits_total " +
             std::to_string(store_.SyncedCommits()) + "\n";
    {
      std::lock_guard<std::mutex> l(commit_max_mu_);
      extra += "# HELP sagad_store_commit_max_seconds Longest write transaction (writer lock held, fsync included).\n"
               "# TYPE sagad_store_commit_max_seconds gauge\nsagad_store_commit_max_seconds " +
               std::to_string(max_commit_seconds_) + "\n";
    }
    auto backlog = store_.OutboxSize();
    if (backlog.ok())
      extra += "# HELP sagad_outbox_backlog Outbox messages not yet delivered to every webhook.\n"
               "# TYPE sagad_outbox_backlog gauge\nsagad_outbox_backlog " +
               std::to_string(*backlog) + "\n";
    return metrics_.Render(extra);
  }

 private:
  // ---- ownership ----
  std::optional<Lease> OwnedLease(const std::string& id) {
    std::lock_guard<std::mutex> l(lease_mu_);
    auto it = owned_.find(id);
    if (it == owned_.end()) return std::nullopt;
    return it->second;
  }
  void Own(const std::string& id, const Lease& lease) {
    std::lock_guard<std::mutex> l(lease_mu_);
    owned_[id] = lease;
  }
  void Disown(const std::string& id) {
    std::lock_guard<std::mutex> l(lease_mu_);
    owned_.erase(id);
  }
  // The fencing token sent downstream: this process's lease generation.
  uint64_t Token(const std::string& id) {
    auto l = OwnedLease(id);
    return l ? l->generation : 0;
  }

  // Takes the instance's lease if this process does not hold it: free,
  // expired, or held by a dead predecessor of the same coordinator id. A new
  // generation means a new owner: reload the state before acting.
  bool EnsureOwned(const std::string& id) {
    if (OwnedLease(id)) return true;
    auto lease = store_.AcquireLease(id, owner_, clock_.NowMillis(), options_.lease_ms,
                                     options_.coordinator_id + "/");
    if (!lease.ok()) return false;
    Own(id, *lease);
    Evict(id);
    Log({{"msg", "lease acquired"}, {"instance", id}, {"generation", lease->generation}});
    return true;
  }

  // Every lease_ms/3: renew what this process owns, forget what it lost,
  // pick up instances whose owner stopped heartbeating, and notice changes
  // another process committed (an approval that came in over its API).
  void Heartbeat() {
    if (Stopping()) return;
    const int64_t now = clock_.NowMillis();
    std::vector<std::string> mine;
    {
      std::lock_guard<std::mutex> l(lease_mu_);
      for (const auto& [id, lease] : owned_) mine.push_back(id);
    }
    if (!mine.empty()) {
      auto lost = store_.RenewLeases(owner_, mine, now, options_.lease_ms);
      if (lost.ok()) {
        for (const auto& id : *lost) {
          Disown(id);
          Evict(id);
          Log({{"msg", "lease lost"}, {"instance", id}});
        }
        std::lock_guard<std::mutex> l(lease_mu_);
        for (auto& [id, lease] : owned_) lease.expires_at = now + options_.lease_ms;
      }
    }
    auto active = store_.ListActive();
    if (active.ok()) {
      for (const auto& a : *active) {
        const std::string& id = a.id;
        if (OwnedLease(id)) {
          std::shared_ptr<Instance> cached;
          {
            std::lock_guard<std::mutex> l(cache_mu_);
            auto it = cache_.find(id);
            if (it != cache_.end()) cached = it->second;
          }
          if (cached && a.version != cached->version()) {
            Evict(id);
            Schedule(id);
          }
          continue;
        }
        auto lease = store_.GetLease(id);
        if (!lease.ok() || lease->expires_at <= now) Schedule(id);
      }
    }
    ScheduleHeartbeat();
  }

  // ---- retention ----
  // Deletes what finished more than retention_ms ago, 100 instances per
  // write transaction and at most 50 transactions per round, once a second
  // (or sooner for a short retention): short transactions, since on LMDB
  // the writer lock is shared by every process.
  void Sweep() {
    const int64_t cutoff = clock_.NowMillis() - options_.retention_ms;
    for (int round = 0; round < 50 && !Stopping(); ++round) {
      auto ids = store_.DeleteFinished(cutoff, 100);
      if (!ids.ok()) {
        Log({{"msg", "retention sweep failed"}, {"error", ids.status().ToString()}});
        break;
      }
      for (const auto& id : *ids) Evict(id);
      metrics_.Inc("sagad_retention_deleted_total", "", static_cast<double>(ids->size()));
      if (ids->size() < 100) break;
    }
    if (!Stopping()) ScheduleSweep();
  }

  void ScheduleSweep() {
    auto timer = std::make_shared<boost::asio::steady_timer>(io_);
    timer->expires_after(std::chrono::milliseconds(std::clamp<int64_t>(options_.retention_ms / 4, 50, 1000)));
    timer->async_wait([this, timer](const boost::system::error_code& ec) {
      if (!ec) boost::asio::post(pool_, [this] { Sweep(); });
    });
  }

  void ScheduleHeartbeat() {
    auto timer = std::make_shared<boost::asio::steady_timer>(io_);
    timer->expires_after(std::chrono::milliseconds(std::max<int64_t>(50, options_.lease_ms / 3)));
    timer->async_wait([this, timer](const boost::system::error_code& ec) {
      if (!ec) boost::asio::post(pool_, [this] { Heartbeat(); });
    });
  }

  // ---- state ----
  static int FindStep(const Instance& inst, const std::string& step) { return inst.StepIndex(step); }

  std::mutex& stripe(const std::string& id) {
    return stripes_[std::hash<std::string>()(id) % kStripes];
  }

  void cache_put(const std::string& id, std::shared_ptr<Instance> inst) {
    std::lock_guard<std::mutex> l(cache_mu_);
    if (IsTerminal(inst->status())) cache_.erase(id);
    else cache_[id] = std::move(inst);
  }

  static bool AgreesWithSnapshot(const Instance& inst, const nlohmann::json& snap) {
    const nlohmann::json& steps = snap.contains("steps") ? snap["steps"] : nlohmann::json();
    if (snap.value("status", "") != SagaStatusName(inst.status()) ||
        snap.value("last_seq", int64_t(0)) != inst.last_seq() || !steps.is_array() ||
        steps.size() != inst.steps().size())
      return false;
    for (size_t i = 0; i < steps.size(); ++i)
      if (steps[i].value("status", "") != StepStatusName(inst.step(i).status())) return false;
    return true;
  }

  // REQUIRES: stripe(id) held.
  StatusOr<std::shared_ptr<Instance>> LoadLocked(const std::string& id) {
    {
      std::lock_guard<std::mutex> l(cache_mu_);
      auto it = cache_.find(id);
      if (it != cache_.end()) return it->second;
    }
    auto snap = store_.GetInstance(id);
    if (!snap.ok()) return snap.status();
    auto events = store_.GetEvents(id);
    if (!events.ok()) return events.status();
    auto inst = Instance::Replay(id, *events);
    if (!inst.ok()) return inst.status();
    inst->set_version(snap->value("version", uint64_t(0)));
    // A quick look for a snapshot that disagrees with the log (the full
    // comparison is `sagactl verify`, offline): saga and step states.
    if (!AgreesWithSnapshot(*inst, *snap))
      Log({{"msg", "snapshot differs from replayed event log; using the log"}, {"instance", id}});
    Log({{"msg", "replayed"}, {"instance", id}, {"events", events->size()}});
    auto ptr = std::make_shared<Instance>(std::move(*inst));
    cache_put(id, ptr);
    return ptr;
  }

  StatusOr<std::shared_ptr<const Instance>> Load(const std::string& id) {
    std::lock_guard<std::mutex> l(stripe(id));
    auto r = LoadLocked(id);
    if (!r.ok()) return r.status();
    return std::shared_ptr<const Instance>(*r);  // cached instances are never changed in place
  }

  void Evict(const std::string& id) {
    std::lock_guard<std::mutex> l(cache_mu_);
    cache_.erase(id);
  }

  // Applies fn's events to a copy and commits them with compare-and-swap.
  // `as_owner`: a driver transition, fenced by this process's lease.
  Status Mutate(const std::string& id, const std::function<Status(Tx&)>& fn, bool as_owner = false) {
    std::optional<Lease> lease;
    if (as_owner) {
      lease = OwnedLease(id);
      if (!lease) return FailedPrecondition("lease lost: not the owner of " + id);
    }
    std::lock_guard<std::mutex> l(stripe(id));
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto cur = LoadLocked(id);
      if (!cur.ok()) return cur.status();
      auto next = std::make_shared<Instance>(**cur);
      Tx tx(*next, clock_.NowMillis());
      SAGAD_RETURN_IF_ERROR(fn(tx));
      if (tx.events().empty()) return Status::Ok();
      next->set_version((*cur)->version() + 1);
      auto t0 = std::chrono::steady_clock::now();
      auto snapshot = std::make_shared<const nlohmann::json>(next->ToJson());
      Status s = store_.Commit(id, (*cur)->version(), *snapshot, tx.events(), tx.Operations(),
                               OutboxMessages(*next, tx.events()), lease ? &*lease : nullptr);
      RecordCommit(std::chrono::steady_clock::now() - t0);
      if (s.code() == StatusCode::kFailedPrecondition &&
          s.message().rfind("lease lost", 0) == 0) {  // fenced: drop the instance
        Disown(id);
        Evict(id);
        Log({{"msg", "lease lost; dropping instance"}, {"instance", id}});
        return s;
      }
      if (s.code() == StatusCode::kFailedPrecondition) {  // lost a race: reload
        Evict(id);
        continue;
      }
      if (!s.ok()) {
        Evict(id);
        return s;
      }
      cache_put(id, next);
      if (IsTerminal(next->status())) Disown(id);
      if (options_.on_outbox && options_.outbox) options_.on_outbox();
      for (const Event& e : tx.events()) {
        metrics_.Inc("sagad_events_total", "type=\"" + e.type + "\"");
        if (e.type == "saga_needs_review") metrics_.Inc("sagad_escalations_total");
        if (e.type == "started" && e.data.value("attempt", 1) > 1) metrics_.Inc("sagad_retries_total");
      }
      if (Engine::IsSettled(SagaStatusName(next->status()))) waiters_.Notify(id, snapshot);
      return Status::Ok();
    }
    return Unavailable("instance " + id + " keeps changing under us; try again");
  }

  void EndInflight(const std::string& key) {
    std::lock_guard<std::mutex> l(submit_mu_);
    inflight_.erase(key);
  }

  Store& store_;

 public:
  Store& store() { return store_; }

 private:
  Adapter& adapter_;
  Clock& clock_;
  EngineOptions options_;

  mutable std::mutex defs_mu_;
  std::map<std::string, std::map<int, SagaDefinitionPtr>> defs_;

  std::mutex stripes_[kStripes];
  std::mutex cache_mu_;
  std::unordered_map<std::string, std::shared_ptr<Instance>> cache_;

  std::mutex sched_mu_;
  std::condition_variable idle_cv_;
  std::unordered_set<std::string> running_, rerun_;
  std::unordered_map<std::string, std::set<int>> steps_running_;  // see TryMarkStep
  int step_tasks_ = 0;
  std::unordered_map<std::string, int64_t> wakes_;  // see WakeAt
  bool stopping_ = false;
  bool stopped_ = false;

  std::mutex submit_mu_;
  std::unordered_set<std::string> inflight_;

  std::mutex rng_mu_;
  Metrics metrics_;
  std::string owner_;  // coordinator_id + "/" + this incarnation
  std::mutex lease_mu_;
  std::unordered_map<std::string, Lease> owned_;
  std::mutex commit_max_mu_;
  double max_commit_seconds_ = 0;
  std::mutex budget_mu_;
  std::map<std::string, RetryBudget> budgets_;
  std::mutex recovery_mu_;
  std::unordered_set<std::string> recovering_;
  std::chrono::steady_clock::time_point recovery_start_;

  boost::asio::thread_pool pool_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread timer_thread_;
  std::mt19937_64 rng_;
  Waiters waiters_{store_, io_, pool_};  // after the timers and workers it uses
};

Engine::Engine(Store& store, Adapter& adapter, Clock& clock, EngineOptions options)
    : impl_(new Impl(store, adapter, clock, options)) {}
Engine::~Engine() = default;
Status Engine::Register(const SagaDefinition& def) { return impl_->Register(def); }
std::vector<SagaDefinitionPtr> Engine::Definitions() const { return impl_->Definitions(); }
Status Engine::Start() { return impl_->Start(); }
void Engine::Stop() { impl_->Stop(); }
StatusOr<SubmitOutcome> Engine::Submit(const std::string& saga, int version,
                                       const nlohmann::json& input,
                                       const std::string& client_key,
                                       const std::string& request_hash,
                                       const TraceContext& trace) {
  return impl_->Submit(saga, version, input, client_key, request_hash, trace);
}
void Engine::FinishSubmission(const std::string& key, int status, const nlohmann::json& r) {
  impl_->FinishSubmission(key, status, r);
}
StatusOr<nlohmann::json> Engine::GetInstance(const std::string& id) { return impl_->GetInstance(id); }
StatusOr<nlohmann::json> Engine::WaitSettled(const std::string& id, std::chrono::milliseconds t) {
  return impl_->WaitSettled(id, t);
}
void Engine::WaitSettledAsync(const std::string& id, std::chrono::milliseconds timeout,
                              std::function<void(StatusOr<nlohmann::json>)> done) {
  impl_->WaitSettledAsync(id, timeout, std::move(done));
}
void Engine::CancelWaits() { impl_->CancelWaits(); }
StatusOr<std::vector<Event>> Engine::GetEvents(const std::string& id) { return impl_->GetEvents(id); }
StatusOr<InstancePage> Engine::List(const InstanceFilter& filter, size_t limit,
                                    const std::string& cursor) {
  return impl_->List(filter, limit, cursor);
}
StatusOr<nlohmann::json> Engine::Approvals() { return impl_->Approvals(); }
StatusOr<nlohmann::json> Engine::Counts() { return impl_->Counts(); }
std::string Engine::MetricsText() { return impl_->MetricsText(); }
Status Engine::CheckWritable() { return impl_->store().CheckWritable(); }
StatusOr<nlohmann::json> Engine::Bundle(const std::string& id) { return impl_->Bundle(id); }
Status Engine::Approve(const std::string& id, const std::string& step, const std::string& actor,
                       const std::string& comment) {
  return impl_->Approve(id, step, actor, comment);
}
Status Engine::Reject(const std::string& id, const std::string& step, const std::string& actor,
                      const std::string& reason) {
  return impl_->Reject(id, step, actor, reason);
}
Status Engine::Cancel(const std::string& id, const std::string& actor, const std::string& reason) {
  return impl_->Cancel(id, actor, reason);
}
Status Engine::RetryNow(const std::string& id, const std::string& step, const std::string& actor,
                        const std::string& comment) {
  return impl_->RetryNow(id, step, actor, comment);
}
Status Engine::Skip(const std::string& id, const std::string& step, const nlohmann::json& result,
                    const std::string& external_ref, const std::string& actor,
                    const std::string& comment) {
  return impl_->Skip(id, step, result, external_ref, actor, comment);
}
Status Engine::ForceCompensate(const std::string& id, const std::string& actor,
                               const std::string& reason) {
  return impl_->ForceCompensate(id, actor, reason);
}
Status Engine::Resolve(const std::string& id, const std::string& step, const std::string& outcome,
                       const std::string& external_ref, const std::string& actor,
                       const std::string& comment) {
  return impl_->Resolve(id, step, outcome, external_ref, actor, comment);
}

}  // namespace sagad
