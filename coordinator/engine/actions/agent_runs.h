// AgentRuns: what an agent does to its run (docs/agents.md): append a call,
// finish, abort. Each is one transition made as an operator's action is
// (OperatorActions::Act: serialised per instance, checked by the machines,
// compare-and-swap, no lease needed since it sends nothing; then the owner's
// driver plans the run again, which sends the call with the step rules:
// STARTED first, UNKNOWN reconciled, approval bound to the request). A
// call that may go at once (no approval, its service open, no earlier call
// to wait for, a worker free) has its STARTED record ride in the append's
// own commit and is sent once that commit is done, as a new saga's first
// step rides in its creation (AppendAsync; the Starter's rules): one
// commit fewer before the send.
//
// Append: the same call_id with the same tool and arguments is the agent
// asking again (after a crash, a lost reply): nothing is recorded, the
// existing call answers. With another tool or other arguments it is
// AlreadyExists. A call that cannot be made (an unknown tool, arguments the
// schema refuses, a template naming a call the run has not made or a value
// that is not there) is InvalidArgument and records nothing. A run that
// went to review because its agent fell silent resumes when the agent
// comes back (a call, finish or abort).
//
// Guards (sagas/guards.h): a call over a guard of its toolbox is
// ResourceExhausted naming the guard and records nothing, or, when the
// guard says "then": "approval", is recorded waiting for an operator with
// the guard named in the call ("guard"). Guards per principal go through
// the GuardGate (guard_gate.h).
//
// Decide: a run's decision (docs/agents.md, "Decisions"): the first value
// recorded under a decision_id is kept and answers every later ask.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "coordinator/engine/actions/guard_gate.h"
#include "coordinator/engine/actions/operator_actions.h"
#include "coordinator/engine/actions/submissions.h"
#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/instances/definition_registry.h"
#include "util/status.h"

namespace sagad {

class AgentRuns {
 public:
  // A guard's verdict, for the metrics: toolbox, guard, "refused" | "held".
  using OnGuard = std::function<void(const std::string&, const std::string&, const char*)>;
  // `starter`: how a call's STARTED record rides in its append and the
  // call is sent after (a new saga's first step's way).
  AgentRuns(const DefinitionRegistry& defs, OperatorActions& act, Store& store, Executor& executor,
            OnGuard on_guard, Submissions::Starter& starter)
      : defs_(defs),
        act_(act),
        store_(store),
        executor_(executor),
        gate_(executor),
        on_guard_(std::move(on_guard)),
        starter_(starter) {}

  // `call`: {"call_id", "tool", "arguments", "reason", "evidence", "model",
  // "prompt_version"}; `done` gets true when it was recorded now, false
  // when the same call was appended before, once its commit is done (or at
  // once when refused before any commit).
  void AppendAsync(const std::string& id, const nlohmann::json& call, const std::string& actor,
                   Completion<StatusOr<bool>> done);
  // COMPLETED once every call is settled; FailedPrecondition naming the call
  // that is not. Finishing a finished run is OK.
  // With `done`: as OperatorActions' actions (asynchronous, see there).
  Status Finish(const std::string& id, const std::string& actor,
                OperatorActions::Done done = nullptr);
  // The committed calls are undone in reverse order (the run ends
  // COMPENSATED); FailedPrecondition naming the irreversible call once one
  // is under way or done. Aborting an aborted run is OK.
  Status Abort(const std::string& id, const std::string& actor, const std::string& reason,
               OperatorActions::Done done = nullptr);

  // What Decide answers: the decision as recorded, and whether it was
  // recorded before (the value sent now, if another, is not kept).
  struct Decided {
    nlohmann::json decision;
    bool replayed = false;
  };
  // `decision`: {"decision_id", "value", "model", "prompt_version"}.
  // InvalidArgument (malformed), FailedPrecondition (not a run; a run that
  // ended takes no new decision, though its recorded ones answer), NotFound.
  void DecideAsync(const std::string& id, const nlohmann::json& decision, const std::string& actor,
                   Completion<StatusOr<Decided>> done);

 private:
  // The calls of the run owner's other runs the guards per principal
  // count: null when its toolbox has no such guard.
  using Elsewhere = std::shared_ptr<const std::vector<GuardedCall>>;
  // A call whose STARTED record rides in its append: its step's mark and
  // rendered request, kept across the tries of the one commit (a try
  // releases what the one before marked).
  struct Chained {
    StepMark mark;
    StepRequest request;
    SagaDefinitionPtr def;
    TraceContext trace;
  };
  // The transition of Append; *appended says whether it added the call;
  // with `chained`, the call's STARTED rides in it when it may go at once.
  StatusOr<Mutation> Appending(const std::string& id, const nlohmann::json& call,
                               const std::string& actor, std::shared_ptr<bool> appended,
                               Elsewhere elsewhere,
                               std::shared_ptr<Chained> chained = nullptr) const;
  // The run's toolbox and owner when its toolbox has a guard per
  // principal on the call's tool; empty strings else (or when the run is
  // not found: the append says so).
  std::pair<std::string, std::string> PrincipalGuarded(const std::string& id,
                                                       const nlohmann::json& call) const;
  // The guards' verdict on a new call inside its transition: refused
  // (ResourceExhausted), or *held with the guard that asks an operator.
  Status CheckGuards(const Tx& tx, const ToolboxDefinition& tb, const nlohmann::json& record,
                     const Elsewhere& elsewhere, nlohmann::json* held) const;

  const DefinitionRegistry& defs_;
  OperatorActions& act_;
  Store& store_;
  Executor& executor_;
  GuardGate gate_;
  OnGuard on_guard_;
  Submissions::Starter& starter_;
};

}  // namespace sagad
