// OperatorActions: what a human may do to an instance (approve, reject,
// cancel, retry now, skip, force compensation, resolve). Each is one
// transition through InstanceRepository::Mutate: serialised per instance,
// checked by the state machines, committed with compare-and-swap, never
// fenced (it makes no downstream call, so it needs no lease). After it
// commits, `wake` asks the owner's driver to plan the instance again; on
// another host the owner notices the new version at its next heartbeat. A
// refused action that loaded a newer version into this process's cache
// wakes it too (the heartbeat compares that cache with the store, so it
// would miss the change); a finished instance is never woken.
//
// Repeating an action that already took effect is not an error (approving
// an approved step, rejecting a rejected one, cancelling a saga already
// turning back): clients retry. Anything else that does not fit the state is
// FailedPrecondition with the reason an operator needs; an unknown step is
// NotFound. An approval binds to the exact request (the step's key and args
// hash); Resolve is refused for a step whose request is in flight here.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/instances/definition_registry.h"
#include "coordinator/engine/instances/instance_repository.h"
#include "coordinator/engine/instances/run_table.h"

namespace sagad {

class OperatorActions {
 public:
  // With `done`, an action below commits asynchronously: a refusal found
  // before any commit is returned at once (`done` is not called); else Ok,
  // and `done` gets the outcome once the commit is done (on a worker).
  // Without, the action blocks until then.
  using Done = Completion<Status>;

  OperatorActions(const DefinitionRegistry& defs, InstanceRepository& repo, const RunTable& runs,
                  Wake wake);

  Status Approve(const std::string& id, const std::string& step, const std::string& actor,
                 const std::string& comment, Done done = nullptr);
  // The saga turns back (compensation of what committed).
  Status Reject(const std::string& id, const std::string& step, const std::string& actor,
                const std::string& reason, Done done = nullptr);
  // Refused once the irreversible step committed, or in NEEDS_REVIEW.
  Status Cancel(const std::string& id, const std::string& actor, const std::string& reason,
                Done done = nullptr);
  // A step waiting on a retry timer (or whose retries ran out and sent the
  // saga to review) is tried again at once with the same key.
  Status RetryNow(const std::string& id, const std::string& step, const std::string& actor,
                  const std::string& comment, Done done = nullptr);
  // An operator supplies the result of a step that has not been sent (or
  // whose unknown outcome is under review); the saga goes on with it.
  Status Skip(const std::string& id, const std::string& step, const nlohmann::json& result,
              const std::string& external_ref, const std::string& actor, const std::string& comment,
              Done done = nullptr);
  // The reverse path of an instance in NEEDS_REVIEW.
  Status ForceCompensate(const std::string& id, const std::string& actor, const std::string& reason,
                         Done done = nullptr);
  // The outcome of a step under review: "committed" or "not_executed".
  Status Resolve(const std::string& id, const std::string& step, const std::string& outcome,
                 const std::string& external_ref, const std::string& actor,
                 const std::string& comment, Done done = nullptr);

  // One transition of a client's making (the actions above, an agent's
  // calls: agent_runs.h): `fn` builds it on the instance as stored now;
  // then the owner is woken as described above.
  Status Act(const std::string& id, const Mutation& fn);
  // Act, or (with `done`) its asynchronous form.
  Status Run(const std::string& id, Mutation fn, Done done);

 private:
  bool StaleRefusal(const std::string& id, uint64_t cached, const Status& s);
  void RunOnOwner(const std::string& id, Mutation fn, uint64_t cached,
                  std::shared_ptr<bool> terminal, Done done, bool again);
  std::string ApprovalRuleOf(const Instance& inst, int i) const;
  std::string RequestDigest(const Instance& inst, int i) const;
  nlohmann::json Verdict(const Instance& inst, int i, const std::string& actor,
                         const std::string& digest) const;
  // What Act and Run do after the commit: wake the owner (see above).
  void Acted(const std::string& id, uint64_t cached, bool terminal, const Status& s);
  // fn(tx, definition) with the instance's definition: Internal if it is
  // not registered. (Templates used only in operator_actions.cc.)
  template <typename Fn>
  Mutation WithDefinition(Fn fn) const;
  // fn(tx, step index) on `step` of the instance: NotFound if it has no
  // such step.
  template <typename Fn>
  static Mutation OnStep(const std::string& id, const std::string& step, Fn fn);

  const DefinitionRegistry& defs_;
  InstanceRepository& repo_;
  const RunTable& runs_;
  Wake wake_;
};

}  // namespace sagad
