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

#include "coordinator/engine/definition_registry.h"
#include "coordinator/engine/instance_repository.h"
#include "coordinator/engine/run_table.h"

namespace sagad {

class OperatorActions {
 public:
  OperatorActions(const DefinitionRegistry& defs, InstanceRepository& repo, const RunTable& runs,
                  std::function<void(const std::string&)> wake);

  Status Approve(const std::string& id, const std::string& step, const std::string& actor,
                 const std::string& comment);
  // The saga turns back (compensation of what committed).
  Status Reject(const std::string& id, const std::string& step, const std::string& actor,
                const std::string& reason);
  // Refused once the irreversible step committed, or in NEEDS_REVIEW.
  Status Cancel(const std::string& id, const std::string& actor, const std::string& reason);
  // A step waiting on a retry timer (or whose retries ran out and sent the
  // saga to review) is tried again at once with the same key.
  Status RetryNow(const std::string& id, const std::string& step, const std::string& actor,
                  const std::string& comment);
  // An operator supplies the result of a step that has not been sent (or
  // whose unknown outcome is under review); the saga goes on with it.
  Status Skip(const std::string& id, const std::string& step, const nlohmann::json& result,
              const std::string& external_ref, const std::string& actor,
              const std::string& comment);
  // The reverse path of an instance in NEEDS_REVIEW.
  Status ForceCompensate(const std::string& id, const std::string& actor,
                         const std::string& reason);
  // The outcome of a step under review: "committed" or "not_executed".
  Status Resolve(const std::string& id, const std::string& step, const std::string& outcome,
                 const std::string& external_ref, const std::string& actor,
                 const std::string& comment);

  // One transition of a client's making (the actions above, an agent's
  // calls: agent_runs.h): `fn` builds it on the instance as stored now;
  // then the owner is woken as described above.
  Status Act(const std::string& id, const std::function<Status(Tx&)>& fn);

 private:
  // Act on `step` of the instance: NotFound if it has no such step.
  Status ActOnStep(const std::string& id, const std::string& step,
                   const std::function<Status(Tx&, int)>& fn);

  const DefinitionRegistry& defs_;
  InstanceRepository& repo_;
  const RunTable& runs_;
  std::function<void(const std::string&)> wake_;
};

}  // namespace sagad
