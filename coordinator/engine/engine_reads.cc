// Engine: reads (instance views, events, lists, approvals, counts, the
// recovery bundle).
#include "adapters/sha256.h"
#include "coordinator/engine/engine_impl.h"
#include "policies/operator_rules.h"
#include "sagas/step_key.h"

namespace sagad {

auto Engine::Impl::GetHead(const std::string& id) -> StatusOr<Engine::Head> {
  if (auto inst = repo_.CachedCopy(id))
    return Engine::Head{inst->is_run(), inst->saga(), inst->saga_version(), inst->owner()};
  auto view = store_.GetInstance(id);  // finished, or not loaded here yet
  if (!view.ok()) return view.status();
  return Engine::Head{view->value("kind", "") == "run", view->value("saga", ""),
                      view->value("saga_version", 0), view->value("owner", "")};
}

auto Engine::Impl::GetInstance(const std::string& id) -> StatusOr<nlohmann::json> {
  auto view = store_.GetInstance(id);
  if (!view.ok()) return view;
  AnnotateWaits(&*view);
  AnnotateActions(&*view);
  return view;
}

// What an operator may do now (policies/operator_rules.h): the console
// enables exactly these. Read from the instance as loaded now; a view one
// transition older is corrected at the next read.
auto Engine::Impl::AnnotateActions(nlohmann::json* view) -> void {
  const std::string id = view->value("id", "");
  auto inst = Load(id);
  if (!inst.ok()) return;
  SagaDefinitionPtr def = defs_.For(**inst);
  (*view)["actions"] =
      AllowedActions(def.get(), **inst, [&](int step) { return runs_.StepUnderWay(id, step); });
}

auto Engine::Impl::WaitSettledAsync(const std::string& id, std::chrono::milliseconds timeout,
                                    Waiters::Done done, Waiters::Until until) -> CancelWait {
  // The first look is at this process's copy when it has one (an
  // unfinished instance it drives): no store read, no parse.
  return waiters_.WaitAsync(id, timeout, std::move(done), std::move(until), repo_.CachedCopy(id));
}

auto Engine::Impl::WaitCallAsync(const std::string& id, const std::string& call_id, bool decided,
                                 std::chrono::milliseconds timeout, Waiters::Done done)
    -> CancelWait {
  // Judged and answered on the run's one call: no view of the whole run.
  Waiters::Shape shape = [call_id](const Instance& inst) {
    nlohmann::json calls = nlohmann::json::array();
    if (int i = inst.StepIndex(call_id); i >= 0)
      calls.push_back(inst.StepView(static_cast<size_t>(i)));
    return nlohmann::json{{"id", inst.id()},
                          {"kind", inst.is_run() ? "run" : "saga"},
                          {"status", inst.StatusName()},
                          {"calls", std::move(calls)}};
  };
  return waiters_.WaitAsync(id, timeout, std::move(done),
                            decided ? Waiters::CallDecided(call_id) : nullptr, repo_.CachedCopy(id),
                            std::move(shape));
}

auto Engine::Impl::FinishWaits(const Status& why) -> void { waiters_.FinishAll(why); }

auto Engine::Impl::CancelWaits() -> void { waiters_.CancelAll(); }

auto Engine::Impl::GetEvents(const std::string& id) -> StatusOr<std::vector<Event>> {
  auto inst = store_.GetInstance(id);
  if (!inst.ok()) return inst.status();
  return store_.GetEvents(id);
}

auto Engine::Impl::List(const InstanceFilter& filter, size_t limit, const std::string& cursor)
    -> StatusOr<InstancePage> {
  return store_.ListInstances(filter, limit, cursor);
}

auto Engine::Impl::Approvals() -> StatusOr<nlohmann::json> {
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
    SagaDefinitionPtr def = defs_.For(**inst);
    for (size_t i = 0; i < (*inst)->steps().size(); ++i) {
      const StepState& st = (*inst)->step(i);
      if (st.status() != StepStatus::kAwaitingApproval) continue;
      nlohmann::json request = nullptr;
      std::string digest;
      if (def) {
        const CallSpec& call = def->steps[i].forward;
        const ServiceConfig* svc = adapter_.Service(call.service);
        auto r = RenderStepRequest(**inst, call);
        if (r.ok())
          request = {{"service", call.service},
                     {"method", call.method},
                     // A tool call on an MCP server: mcp://SERVER/TOOL.
                     {"url", call.IsMcp() ? "mcp://" + call.service + "/" + r->path
                                          : (svc ? svc->base_url : std::string()) + r->path},
                     {"body", r->body},
                     {"idempotency_key", StepKey(id, st.name)},
                     {"args_hash", r->hash},
                     {"body_sha256", Sha256Hex(CanonicalJson(r->body))}};
        else
          request = {{"error", r.status().message()}};
        if (r.ok()) digest = r->hash;  // "METHOD path\n" + canonical body (step_request.h)
      }
      // What an operator approves is bound to this digest (the request's
      // hash, its key's binding too): POST /v1/approvals/actions/approve
      // names it, and approves only while it still matches.
      nlohmann::json card = {{"instance_id", id},
                             {"digest", digest.empty() ? nlohmann::json() : nlohmann::json(digest)},
                             {"irreversible", def && def->steps[i].irreversible},
                             {"saga", (*inst)->saga()},
                             {"saga_version", (*inst)->saga_version()},
                             {"step", st.name},
                             {"key", StepKey(id, st.name)},
                             {"input", (*inst)->input()},
                             {"since", st.approval_requested_at},
                             {"owner", (*inst)->owner()},
                             {"request", request}};
      // A run's call: what the agent asked for and why (tool, arguments,
      // reason, evidence, model, prompt_version) and who it is.
      if (st.call.is_object()) {
        card["kind"] = "run";
        card["call"] = st.call;
        card["metadata"] = (*inst)->metadata();
      }
      out.push_back(std::move(card));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const nlohmann::json& x, const nlohmann::json& y) {
    return x.value("since", int64_t(0)) < y.value("since", int64_t(0));
  });
  return nlohmann::json(out);
}

auto Engine::Impl::OpenRuns(const std::string& principal) -> StatusOr<size_t> {
  auto active = store_.ListActive();
  if (!active.ok()) return active.status();
  size_t n = 0;
  for (const auto& a : *active) {
    if (!defs_.GetToolbox(a.saga, 0)) continue;  // a saga's instance, not a run
    auto inst = Load(a.id);
    if (inst.ok() && (*inst)->is_run() && (*inst)->owner() == principal) ++n;
  }
  return n;
}

auto Engine::Impl::Counts() -> StatusOr<nlohmann::json> {
  auto active = store_.ListActive();
  if (!active.ok()) return active.status();
  nlohmann::json by = {
      {"RUNNING", 0}, {"AWAITING_APPROVAL", 0}, {"COMPENSATING", 0}, {"NEEDS_REVIEW", 0}};
  for (const auto& a : *active) by[a.status] = by.value(a.status, 0) + 1;
  return nlohmann::json{{"unfinished", by}, {"total_unfinished", active->size()}};
}

auto Engine::Impl::Bundle(const std::string& id) -> StatusOr<nlohmann::json> {
  auto j = store_.GetInstance(id);
  if (!j.ok()) return j.status();
  auto events = store_.GetEvents(id);
  if (!events.ok()) return events.status();
  nlohmann::json evs = nlohmann::json::array();
  for (const auto& e : *events) evs.push_back(e.ViewJson());
  nlohmann::json ops = nlohmann::json::array(), confirmed = nlohmann::json::array(),
                 unknown = nlohmann::json::array();
  for (const auto& st : (*j)["steps"]) {
    std::string name = st.value("name", "");
    for (const std::string& key : {StepKey(id, name), CompensationKey(id, name)}) {
      auto op = store_.GetOperation(key);
      if (!op.ok()) continue;
      nlohmann::json oj = op->ToJson();
      ops.push_back(oj);
      if (op->state == "COMMITTED" || op->state == "COMPENSATED")
        confirmed.push_back(
            {{"key", key}, {"step", name}, {"kind", op->kind}, {"external_ref", op->external_ref}});
      if (op->state == "STARTED" || op->state == "UNKNOWN" || op->state == "COMPENSATING" ||
          op->state == "NEEDS_REVIEW")
        unknown.push_back(
            {{"key", key}, {"step", name}, {"kind", op->kind}, {"last_error", op->last_error}});
    }
  }
  std::string status = j->value("status", "");
  std::string recommendation;
  if (status != "NEEDS_REVIEW") {
    recommendation = "none: the instance is " + status;
  } else if (!unknown.empty()) {
    recommendation =
        "check the downstream for each unknown effect by its idempotency key, "
        "then POST "
        ".../steps/{step}/resolve with outcome \"committed\" (and "
        "external_ref) or "
        "\"not_executed\"";
  } else {
    recommendation = "inspect review_reason; resolve the step it names";
  }
  auto events_inst = Instance::Replay(id, *events);
  SagaDefinitionPtr def = events_inst.ok() ? defs_.For(*events_inst) : nullptr;
  nlohmann::json plan = nlohmann::json::array();
  if (def && events_inst->steps().size() == def->steps.size())
    plan = CompensationPlan(*def, *events_inst);
  return nlohmann::json{
      {"instance", *j},
      {"definition", def ? def->ToJson() : nlohmann::json()},
      {"compensations", plan},
      {"reason", j->value("review_reason", "")},
      {"review_reason", j->contains("review_reason") ? (*j)["review_reason"] : nlohmann::json()},
      {"events", evs},
      {"operations", ops},
      {"confirmed_effects", confirmed},
      {"unknown_effects", unknown},
      {"recommended_action", recommendation}};
}

}  // namespace sagad
