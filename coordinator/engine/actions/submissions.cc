#include "coordinator/engine/actions/submissions.h"

#include <cstdio>

#include "coordinator/engine/instances/definition_registry.h"
#include "coordinator/engine/instances/instance_repository.h"
#include "coordinator/engine/instances/ownership.h"
#include "coordinator/engine/instances/transition.h"
#include "coordinator/engine/steps/step_request.h"
#include "coordinator/store/store_fault.h"
#include "sagas/schema_errors.h"
#include "util/crash_point.h"
#include "util/log.h"

namespace sagad {
namespace {

std::string NewInstanceId(int64_t now_ms, Random& random) {
  const uint64_t r = random.Next();
  char buf[40];
  snprintf(buf, sizeof buf, "%012llx-%016llx", static_cast<unsigned long long>(now_ms),
           static_cast<unsigned long long>(r));
  return buf;
}

}  // namespace

Status Submissions::Starter::FirstStep(Tx&, const SagaDefinition&, StepMark* step, StepRequest*) {
  *step = StepMark();
  return Status::Ok();
}

Submissions::Submissions(const DefinitionRegistry& defs, InstanceRepository& repo,
                         Ownership& ownership, const Clock& clock, Starter& starter, Random& random)
    : defs_(defs),
      repo_(repo),
      ownership_(ownership),
      clock_(clock),
      random_(random),
      starter_(starter) {}

StatusOr<SagaDefinitionPtr> Submissions::DefinitionFor(const std::string& saga, int version,
                                                       const nlohmann::json& input) const {
  SagaDefinitionPtr def = defs_.Get(saga, version);
  if (!def && version > 0 && defs_.Get(saga, 0))
    return NotFound("saga '" + saga + "' has no registered version " + std::to_string(version));
  if (!def) return NotFound("saga '" + saga + "' is not registered");
  if (!input.is_object()) return InvalidArgument("'input' must be a JSON object");
  std::vector<SchemaError> errors = def->InputErrors(input);
  if (!errors.empty())
    return InvalidArgument("input does not match saga '" + saga +
                           "': " + DescribeSchemaErrors(errors, "input"));
  return def;
}

StatusOr<SagaDefinitionPtr> Submissions::RunDefinitionFor(const std::string& toolbox, int version,
                                                          const nlohmann::json& input) const {
  ToolboxDefinitionPtr tb = defs_.GetToolbox(toolbox, version);
  if (!tb && version > 0 && defs_.GetToolbox(toolbox, 0))
    return NotFound("toolbox '" + toolbox + "' has no registered version " +
                    std::to_string(version));
  if (!tb) return NotFound("toolbox '" + toolbox + "' is not registered");
  std::vector<SchemaError> errors = tb->InputErrors(input);
  if (!errors.empty())
    return InvalidArgument("input does not match toolbox '" + toolbox +
                           "': " + DescribeSchemaErrors(errors, "input"));
  return RunDefinition(tb->name, tb->version, tb->idle_timeout_s * 1000, tb->on_idle == "abort");
}

Status Submissions::Begin(const std::string& saga, int version, const nlohmann::json& input,
                          const std::string& client_key, const std::string& request_hash,
                          const TraceContext& trace, const nlohmann::json* run_metadata,
                          const std::string& by, Creation* c) {
  auto checked =
      run_metadata ? RunDefinitionFor(saga, version, input) : DefinitionFor(saga, version, input);
  if (!checked.ok()) return checked.status();
  c->def = *checked;
  c->saga = saga;
  c->key = client_key;
  c->hash = request_hash;
  c->trace = trace;
  if (!client_key.empty()) {
    const Status in_progress =
        FailedPrecondition("a request with this Idempotency-Key is still in progress");
    {
      MutexLock l(mu_);
      if (inflight_.count(client_key)) return in_progress;
    }
    // Outside the lock: one key's round trip to the store holds up no
    // other submission. A request with the key that began meanwhile is
    // found in flight below; one that also ended meanwhile is found by the
    // store, whose key is unique (End replays it).
    auto existing = repo_.store().GetSubmission(client_key);
    if (existing.ok()) {
      auto replay = Replay(*existing, request_hash);
      if (!replay.ok()) return replay.status();
      c->replay = *replay;
      return Status::Ok();
    }
    if (existing.status().code() != StatusCode::kNotFound) return existing.status();
    MutexLock l(mu_);
    if (!inflight_.insert(client_key).second) return in_progress;
    c->sub.emplace();
    c->sub->key = client_key;
    c->sub->request_hash = request_hash;
  }
  int64_t now = clock_.NowMillis();
  c->id = NewInstanceId(now, random_);
  Event created = Instance::CreatedEvent(c->id, *c->def, input, trace.ToJson(),
                                         run_metadata ? *run_metadata : nlohmann::json(), by);
  created.seq = 1;
  created.at_ms = now;
  c->events.push_back(created);
  Status s = c->inst.Apply(created);
  // The first step's STARTED record may ride in the creation commit.
  Tx tx(c->inst, now);
  if (s.ok()) s = starter_.FirstStep(tx, *c->def, &c->first, &c->request);
  if (!s.ok()) return End(*c, s).status();
  c->events.insert(c->events.end(), tx.events().begin(), tx.events().end());
  c->ops = tx.Operations();
  c->inst.set_version(1);
  if (c->sub) {
    c->sub->instance_id = c->id;
    c->sub->created_at = now;
  }
  c->lease = ownership_.FirstLease();
  if (c->first) CrashPoint(CrashAt::kBeforeStarted);  // nothing is durable yet
  return Status::Ok();
}

StatusOr<SubmitOutcome> Submissions::End(Creation& c, const Status& s) {
  if (s.ok()) ownership_.AdoptFirst(c.id, c.lease);
  if (!s.ok()) {
    starter_.StartCreated(c.id, c.def, std::move(c.first), &c.request, c.trace, false);
    if (c.sub) EndInflight(c.key);
    if (c.sub && s.code() == StatusCode::kAlreadyExists) {
      // Another process sharing the data dir took this key first.
      auto existing = repo_.store().GetSubmission(c.key);
      if (existing.ok()) return Replay(*existing, c.hash);
    }
    return s;
  }
  EngineLog(LogLevel::kDebug, {{"msg", "instance created"},
                               {"instance", c.id},
                               {"saga", c.saga},
                               {"trace_id", c.trace.trace_id}});
  CrashPoint(CrashAt::kAfterCreate);
  if (c.first) CrashPoint(CrashAt::kAfterStarted);
  starter_.StartCreated(c.id, c.def, std::move(c.first), &c.request, c.trace, true);
  SubmitOutcome out;
  out.instance_id = c.id;
  return out;
}

void Submissions::SubmitAsync(const std::string& saga, int version, const nlohmann::json& input,
                              const std::string& client_key, const std::string& request_hash,
                              const TraceContext& trace, const nlohmann::json* run_metadata,
                              const std::string& by, Completion<StatusOr<SubmitOutcome>> done) {
  auto c = std::make_shared<Creation>();
  Status begun =
      Begin(saga, version, input, client_key, request_hash, trace, run_metadata, by, &*c);
  if (!begun.ok()) return done(begun);
  if (c->replay) return done(*c->replay);
  repo_.CreateAsync(c->inst, c->events, c->ops, c->sub ? &*c->sub : nullptr, &c->lease,
                    [this, c, done = std::move(done)](Status s) { done(End(*c, s)); });
}

StatusOr<SubmitOutcome> Submissions::Replay(const Submission& first,
                                            const std::string& request_hash) {
  if (first.request_hash != request_hash)
    return AlreadyExists(
        "this Idempotency-Key was already used with a different request, "
        "which created instance " +
        first.instance_id + " (/v1/instances/" + first.instance_id + ")");
  SubmitOutcome out;
  out.instance_id = first.instance_id;
  out.replayed = true;
  out.stored_status = first.response_status;
  out.stored_response = first.response;
  return out;
}

void Submissions::Finish(const std::string& key, int status, const nlohmann::json& response,
                         Task then) {
  if (key.empty() || status == 0) {
    if (!key.empty()) EndInflight(key);
    if (then) then();
    return;
  }
  writing_.Begin();
  repo_.store().SetSubmissionResponseAsync(
      key, status, response, [this, key, then = std::move(then)](Status s) {
        if (!s.ok())
          EngineLog(LogLevel::kError,
                    {{"msg", "cannot store submission response"}, {"error", s.ToString()}});
        EndInflight(key);
        if (then) then();
        writing_.End();
      });
}

void Submissions::WaitIdle() { writing_.WaitNone(); }

void Submissions::EndInflight(const std::string& key) {
  MutexLock l(mu_);
  inflight_.erase(key);
}

}  // namespace sagad
