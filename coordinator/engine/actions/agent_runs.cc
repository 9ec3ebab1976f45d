#include "coordinator/engine/actions/agent_runs.h"

#include "coordinator/engine/instances/saga_turns.h"
#include "coordinator/engine/steps/step_request.h"
#include "policies/approval_policy.h"
#include "policies/operator_rules.h"
#include "policies/planner.h"
#include "util/crash_point.h"
#include "util/json_limits.h"

namespace sagad {

namespace {

Status NotARun(const Instance& inst) {
  if (inst.is_run()) return Status::Ok();
  return FailedPrecondition("instance " + inst.id() +
                            " is a saga, not a run (runs are opened "
                            "with POST /v1/toolboxes/{toolbox}/runs)");
}

// A run its agent left silent waits in review for the agent: its return
// (a call, finish, abort) resumes it.
Status ResumeIfSilent(Tx& tx, const std::string& actor) {
  const Instance& inst = tx.inst();
  if (inst.status() != SagaStatus::kNeedsReview || inst.review_reason() != kAgentSilent)
    return Status::Ok();
  return tx.Saga(SagaEvent::kResume, {{"by", actor}, {"reason", "the agent came back"}});
}

// The call's fields as recorded: what the agent sent, checked.
StatusOr<nlohmann::json> CallRecord(const nlohmann::json& call) {
  if (!call.is_object()) return InvalidArgument("a call must be a JSON object");
  SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(
      call, {"call_id", "tool", "arguments", "reason", "evidence", "model", "prompt_version"},
      "the call"));
  if (!call.contains("call_id") || !call["call_id"].is_string() ||
      !IsCallId(call["call_id"].get<std::string>()))
    return InvalidArgument("call_id must be 1-64 of [A-Za-z0-9_-] (and not \"input\")");
  if (!call.contains("tool") || !call["tool"].is_string())
    return InvalidArgument("tool must be the name of one of the toolbox's tools");
  nlohmann::json out = {{"tool", call["tool"]},
                        {"arguments", call.value("arguments", nlohmann::json::object())}};
  if (!out["arguments"].is_object()) return InvalidArgument("arguments must be a JSON object");
  for (const char* f : {"reason", "model", "prompt_version"}) {
    if (!call.contains(f) || call[f].is_null()) continue;
    if (!call[f].is_string()) return InvalidArgument(std::string(f) + " must be a string");
    out[f] = call[f];
  }
  if (call.contains("evidence") && !call["evidence"].is_null()) {
    if (!call["evidence"].is_array()) return InvalidArgument("evidence must be an array");
    out["evidence"] = call["evidence"];
  }
  return out;
}

std::string ToolList(const ToolboxDefinition& tb) {
  std::string out;
  for (const auto& t : tb.tools) out += (out.empty() ? "" : ", ") + t.name();
  return out;
}

// The new call's step, added to the transition: checked against the
// toolbox, and its request rendered once now (a value that is not there is
// refused now, unless an earlier call still to settle may supply it).
Status AddCall(Tx& tx, const ToolboxDefinition& tb, const std::string& call_id,
               const nlohmann::json& record, bool hold) {
  const Instance& inst = tx.inst();
  if (inst.steps().size() >= static_cast<size_t>(tb.max_calls))
    return FailedPrecondition("the run has made " + std::to_string(inst.steps().size()) +
                              " calls, the most its toolbox allows (max_calls)");
  const std::string tool_name = record["tool"].get<std::string>();
  const ToolDefinition* tool = tb.Tool(tool_name);
  if (!tool)
    return InvalidArgument("toolbox '" + tb.name + "' has no tool '" + SanitizeUtf8(tool_name) +
                           "' (its tools: " + ToolList(tb) + ")");
  const nlohmann::json& args = record["arguments"];
  std::vector<SchemaError> errors = tool->ArgumentErrors(args);
  if (!errors.empty())
    return InvalidArgument("arguments do not match tool '" + tool_name +
                           "': " + (errors[0].path.empty() ? "arguments" : errors[0].path) + " " +
                           errors[0].message);
  auto step = CallStep(
      *tool, call_id, [&](const std::string& c) { return inst.StepIndex(c) >= 0; },
      [&](const ApprovalRule& r) { return EvaluateApprovalRule(r, args); });
  if (!step.ok()) return step.status();
  if (hold) step->requires_approval = true;  // a guard asks an operator
  nlohmann::json data = record;
  data["definition"] = StepToJson(*step);
  SAGAD_RETURN_IF_ERROR(tx.Call(call_id, std::move(data)));
  auto r = RenderStepRequest(tx.inst(), tx.inst().run_definition()->steps.back().forward);
  if (r.ok()) return Status::Ok();
  for (size_t i = 0; i + 1 < tx.inst().steps().size(); ++i)
    if (!CallSettled(tx.inst().step(i).status())) return Status::Ok();
  return InvalidArgument("the call's request cannot be built: " + r.status().message());
}

bool HasPrincipalGuard(const ToolboxDefinition& tb, const std::string& tool) {
  for (const Guard& g : tb.guards)
    if (g.per_principal() && g.tool == tool) return true;
  return false;
}

// The decision's fields as recorded: what the agent sent, checked.
StatusOr<nlohmann::json> DecisionRecord(const nlohmann::json& d) {
  if (!d.is_object()) return InvalidArgument("a decision must be a JSON object");
  SAGAD_RETURN_IF_ERROR(
      OnlyKnownKeys(d, {"decision_id", "value", "model", "prompt_version"}, "the decision"));
  if (!d.contains("decision_id") || !d["decision_id"].is_string() ||
      !IsCallId(d["decision_id"].get<std::string>()))
    return InvalidArgument("decision_id must be 1-64 of [A-Za-z0-9_-] (and not \"input\")");
  if (!d.contains("value"))
    return InvalidArgument("value is required: what was decided (any JSON)");
  nlohmann::json out = {{"decision_id", d["decision_id"]}, {"value", d["value"]}};
  for (const char* f : {"model", "prompt_version"}) {
    if (!d.contains(f) || d[f].is_null()) continue;
    if (!d[f].is_string()) return InvalidArgument(std::string(f) + " must be a string");
    out[f] = d[f];
  }
  return out;
}

}  // namespace

std::pair<std::string, std::string> AgentRuns::PrincipalGuarded(const std::string& id,
                                                                const nlohmann::json& call) const {
  const nlohmann::json tool = call.is_object() ? call.value("tool", nlohmann::json()) : nullptr;
  if (!tool.is_string()) return {};
  // No store read for a call no registered toolbox guards per principal
  // (most calls): the run is read only when one might.
  bool guarded = false;
  for (const ToolboxDefinitionPtr& tb : defs_.AllToolboxes())
    guarded = guarded || HasPrincipalGuard(*tb, tool.get<std::string>());
  if (!guarded) return {};
  auto view = store_.GetInstance(id);
  if (!view.ok() || view->value("kind", "") != "run") return {};
  ToolboxDefinitionPtr tb =
      defs_.GetToolbox(view->value("saga", ""), view->value("saga_version", 0));
  const std::string owner = view->value("owner", "");
  if (!tb || owner.empty() || !HasPrincipalGuard(*tb, tool.get<std::string>())) return {};
  return {tb->name, owner};
}

Status AgentRuns::CheckGuards(const Tx& tx, const ToolboxDefinition& tb,
                              const nlohmann::json& record, const Elsewhere& elsewhere,
                              nlohmann::json* held) const {
  const std::string tool = record["tool"].get<std::string>();
  bool guarded = false;  // most calls: no guard names their tool, nothing to gather
  for (const Guard& g : tb.guards) guarded = guarded || g.tool == tool;
  if (!guarded) return Status::Ok();
  std::vector<GuardedCall> mine;
  for (const StepState& st : tx.inst().steps())
    mine.push_back({st.call.value("tool", ""), st.call.value("arguments", nlohmann::json()),
                    StepStatusName(st.status()), st.call.value("appended_at", int64_t{0})});
  std::vector<GuardedCall> all;
  for (const Guard& g : tb.guards) {
    if (g.tool != tool) continue;
    const std::vector<GuardedCall>* made = &mine;
    if (g.per_principal()) {
      if (all.empty()) {
        all = mine;
        if (elsewhere) all.insert(all.end(), elsewhere->begin(), elsewhere->end());
      }
      made = &all;
    }
    auto over = OverGuard(g, *made, tool, record["arguments"], tx.now());
    if (!over.ok()) return over.status();
    if (over->empty()) continue;
    if (!g.approval) {
      if (on_guard_) on_guard_(tb.name, g.name, "refused");
      return ResourceExhausted(*over);
    }
    if (held->is_null()) *held = {{"name", g.name}, {"why", *over}};
  }
  if (!held->is_null() && on_guard_) on_guard_(tb.name, (*held)["name"], "held");
  return Status::Ok();
}

StatusOr<Mutation> AgentRuns::Appending(const std::string& id, const nlohmann::json& call,
                                        const std::string& actor, std::shared_ptr<bool> appended,
                                        Elsewhere elsewhere,
                                        std::shared_ptr<Chained> chained) const {
  auto record = CallRecord(call);
  if (!record.ok()) return record.status();
  const std::string call_id = call["call_id"].get<std::string>();
  return Mutation([this, id, call_id, record = *record, actor, appended, elsewhere,
                   chained](Tx& tx) -> Status {
    *appended = false;                        // a lost race applies it again
    if (chained) chained->mark = StepMark();  // and marks again what it starts
    const Instance& inst = tx.inst();
    SAGAD_RETURN_IF_ERROR(NotARun(inst));
    if (int i = inst.StepIndex(call_id); i >= 0) {
      const nlohmann::json& first = inst.step(i).call;
      if (first.value("tool", "") == record["tool"] &&
          first.value("arguments", nlohmann::json()) == record["arguments"])
        return Status::Ok();  // the agent asking again: the first call answers
      const std::string tool = first.value("tool", "");
      return AlreadyExists("call '" + call_id + "' of run " + id + " was made with " +
                           (tool != record["tool"]
                                ? "another tool ('" + tool + "', not '" +
                                      SanitizeUtf8(record["tool"].get<std::string>()) + "')"
                                : "tool '" + tool + "' and other arguments") +
                           "; a new call needs a new call_id");
    }
    SAGAD_RETURN_IF_ERROR(ResumeIfSilent(tx, actor));
    SagaStatus ss = tx.inst().status();
    if (ss != SagaStatus::kRunning && ss != SagaStatus::kAwaitingApproval)
      return FailedPrecondition("run " + id + " is " + tx.inst().StatusName() +
                                "; it takes no more calls");
    ToolboxDefinitionPtr tb = defs_.GetToolbox(inst.saga(), inst.saga_version());
    if (!tb)
      return FailedPrecondition("toolbox '" + inst.saga() + "' version " +
                                std::to_string(inst.saga_version()) + " is not registered here");
    nlohmann::json held;
    SAGAD_RETURN_IF_ERROR(CheckGuards(tx, *tb, record, elsewhere, &held));
    *appended = true;
    nlohmann::json made = record;
    made["by"] = actor;  // who made it: the call's view and its event say so
    if (!held.is_null()) made["guard"] = held;
    SAGAD_RETURN_IF_ERROR(AddCall(tx, *tb, call_id, made, !held.is_null()));
    if (!chained) return Status::Ok();
    chained->def = tx.inst().run_definition();
    chained->trace = TraceContext::FromJson(tx.inst().trace());
    SAGAD_RETURN_IF_ERROR(starter_.FirstStep(tx, *chained->def, &chained->mark, &chained->request));
    if (chained->mark) CrashPoint(CrashAt::kBeforeStarted);  // the STARTED is not durable yet
    return Status::Ok();
  });
}

void AgentRuns::AppendAsync(const std::string& id, const nlohmann::json& call,
                            const std::string& actor, Completion<StatusOr<bool>> done) {
  auto start = [this, id, call, actor](Elsewhere elsewhere, Completion<StatusOr<bool>> done) {
    auto appended = std::make_shared<bool>(false);
    auto chained = std::make_shared<Chained>();
    auto fn = Appending(id, call, actor, appended, std::move(elsewhere), chained);
    if (!fn.ok()) return done(fn.status());
    // With a continuation Run refuses nothing before its commit: always Ok.
    (void)act_.Run(id, std::move(*fn), [this, id, appended, chained, done](Status s) {
      // The call's STARTED rode in the commit: send it (not committed: the
      // mark goes, nothing is sent).
      if (chained->mark) {
        if (s.ok() && *appended) CrashPoint(CrashAt::kAfterStarted);
        starter_.StartCreated(id, chained->def, std::move(chained->mark), &chained->request,
                              chained->trace, s.ok() && *appended);
      }
      chained->mark = StepMark();
      if (!s.ok()) return done(s);
      done(*appended);
    });
  };
  auto [toolbox, owner] = PrincipalGuarded(id, call);
  if (toolbox.empty()) return start(nullptr, std::move(done));
  // One append of this principal and toolbox at a time, from its read of
  // the other runs to its commit: in this process (the gate), and between
  // the coordinators sharing the store (its shared lock).
  gate_.Run(toolbox + "\n" + owner,
            [this, id, toolbox = toolbox, owner = owner, start, done](Task release) {
              auto unlock = store_.LockShared("sagad guard\n" + toolbox + "\n" + owner);
              if (!unlock.ok()) {
                release();
                return done(unlock.status());
              }
              // Released off the thread that ends the commit (an owner or the
              // committer, which make no store round trip), then the gate.
              auto end = [this, release, unlock = *unlock] {
                executor_.Post([release, unlock] {
                  unlock();
                  release();
                });
              };
              auto calls = PrincipalCalls(store_, toolbox, owner, id);
              if (!calls.ok()) {
                end();
                return done(calls.status());
              }
              start(std::make_shared<const std::vector<GuardedCall>>(std::move(*calls)),
                    [end, done](StatusOr<bool> r) {
                      end();
                      done(std::move(r));
                    });
            });
}

void AgentRuns::DecideAsync(const std::string& id, const nlohmann::json& decision,
                            const std::string& actor, Completion<StatusOr<Decided>> done) {
  auto record = DecisionRecord(decision);
  if (!record.ok()) return done(record.status());
  auto out = std::make_shared<Decided>();
  auto fn = [id, record = *record, actor, out](Tx& tx) -> Status {
    SAGAD_RETURN_IF_ERROR(NotARun(tx.inst()));
    const std::string did = record["decision_id"].get<std::string>();
    if (const nlohmann::json* first = tx.inst().Decision(did)) {
      out->decision = *first;  // the first write wins
      out->replayed = true;
      return Status::Ok();
    }
    SAGAD_RETURN_IF_ERROR(ResumeIfSilent(tx, actor));
    SagaStatus ss = tx.inst().status();
    if (ss != SagaStatus::kRunning && ss != SagaStatus::kAwaitingApproval)
      return FailedPrecondition("run " + id + " is " + tx.inst().StatusName() +
                                "; it takes no new decision");
    if (tx.inst().decisions().size() >= kMaxDecisions)
      return FailedPrecondition("run " + id + " keeps " + std::to_string(kMaxDecisions) +
                                " decisions, the most a run keeps");
    nlohmann::json made = record;
    made["by"] = actor;
    SAGAD_RETURN_IF_ERROR(tx.Decision(made));
    out->decision = tx.inst().decisions().back();
    out->replayed = false;
    return Status::Ok();
  };
  (void)act_.Run(id, std::move(fn), [out, done](Status s) {
    if (!s.ok()) return done(s);
    done(*out);
  });
}

Status AgentRuns::Finish(const std::string& id, const std::string& actor,
                         OperatorActions::Done done) {
  return act_.Run(
      id,
      [id, actor](Tx& tx) -> Status {
        SAGAD_RETURN_IF_ERROR(NotARun(tx.inst()));
        if (tx.inst().status() == SagaStatus::kCompleted) return Status::Ok();
        SAGAD_RETURN_IF_ERROR(ResumeIfSilent(tx, actor));
        const Instance& inst = tx.inst();
        if (inst.status() == SagaStatus::kCompensating || inst.status() == SagaStatus::kCompensated)
          return FailedPrecondition("run " + id + " was aborted (" + inst.StatusName() +
                                    "); it cannot finish");
        for (const StepState& st : inst.steps())
          if (!CallSettled(st.status()))
            return FailedPrecondition("call '" + st.name + "' is " + StepStatusName(st.status()) +
                                      "; a run finishes once every call is settled");
        if (inst.status() != SagaStatus::kRunning)
          return FailedPrecondition("run " + id + " is " + inst.StatusName() +
                                    "; only an OPEN run " + "finishes");
        return tx.Saga(SagaEvent::kComplete, {{"by", actor}, {"finished", true}});
      },
      std::move(done));
}

Status AgentRuns::Abort(const std::string& id, const std::string& actor, const std::string& reason,
                        OperatorActions::Done done) {
  return act_.Run(
      id,
      [id, actor, reason](Tx& tx) -> Status {
        SAGAD_RETURN_IF_ERROR(NotARun(tx.inst()));
        SagaStatus ss = tx.inst().status();
        if (ss == SagaStatus::kCompensating || ss == SagaStatus::kCompensated) return Status::Ok();
        SAGAD_RETURN_IF_ERROR(ResumeIfSilent(tx, actor));
        const Instance& inst = tx.inst();
        const SagaDefinition& def = *inst.run_definition();
        if (int p = PivotInPlay(def, inst); p >= 0)
          return FailedPrecondition(
              "call '" + inst.step(p).name + "' (tool '" + inst.step(p).call.value("tool", "") +
              "') is irreversible and " + StepStatusName(inst.step(p).status()) +
              ": the run can no longer be undone");
        SAGAD_RETURN_IF_ERROR(MayCancel(def, inst));
        const std::string why = "run aborted: " + reason;
        SAGAD_RETURN_IF_ERROR(tx.RejectAwaitingApprovals(actor, why));
        return tx.Saga(SagaEvent::kStartCompensation,
                       {{"by", actor}, {"aborted", true}, {"reason", why}});
      },
      std::move(done));
}

}  // namespace sagad
