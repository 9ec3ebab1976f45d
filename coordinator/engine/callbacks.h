// The engine's callback shapes. Each crosses one boundary, and a reader of
// coordinator/engine meets these and no other std::function:
// - Task: work handed to an executor (Executor::PostTo an instance's owner);
//   the only way work crosses threads.
// - Mutation: a transition's body, applied to a Tx in the instance's turn
//   (again after a lost race); it adds the events the commit makes durable.
// - Completion<T>: how an asynchronous operation (a commit, a call, a wait,
//   an operator's action) ends: called once, with its result.
// - Wake: plan an instance again (the driver's Schedule), for the parts that
//   learn something changed (a service resumed, an operator acted).
// - CancelWait: withdraws a wait not yet answered; true if it was withdrawn.
// What the engine's parts ask of each other beyond these is an interface
// (StepRunner::Host, InstanceRepository::Listener, Submissions::Starter).
#pragma once

#include <functional>
#include <string>

#include "util/status.h"

namespace sagad {

class Tx;

using Task = std::function<void()>;
using Mutation = std::function<Status(Tx&)>;
template <typename T>
using Completion = std::function<void(T)>;
using Wake = std::function<void(const std::string& instance_id)>;
using CancelWait = std::function<bool()>;

}  // namespace sagad
