// StepAction: one action in flight on one step of one instance, as one
// object (Beast's composed operation). It says what the action is about
// (the instance, its definition, the step, the phase, the key and attempt it
// sends or asks about, the trace its calls continue) and holds what the
// action holds: the step's mark, the service's permit while a request is
// out, and the caller's `done`. StepRunner's continuations carry this one
// object from the first commit to the last reply; none carries a phase, a
// key or a mark of its own.
//
// Contract:
// - Made with a mark that holds its step (checked: an action without its
//   step's mark aborts, an assertion that stays on).
// - End(next) ends it once (later calls do nothing): the permit goes, `done`
//   learns what the driver does next, then the mark goes (after `done`: the
//   engine's stop waits for a mark, and `done` may still use the engine,
//   RunTable::ReleaseThen). Dropped without ending (a task an executor
//   discards), what it holds goes with it.
// - MoveOn(def, mark): a forward send whose outcome is recorded, and whose
//   commit started the next step (marked by `mark`, taken in that commit),
//   goes on as that step's send: its own step's mark goes, the new one is
//   held.
// Thread-safety: none; an action runs on its instance's owner thread (every
// continuation of it is posted there: StepRunner::Continue and the commits'
// completions), one step of it at a time. While its request is out, the
// thread that brings the reply only reads it (id and key, to log a
// withheld send), and nothing changes it until the reply is handed over.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "adapters/adapter.h"
#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/instances/step_mark.h"
#include "coordinator/engine/services/service_gates.h"
#include "sagas/definition.h"

namespace sagad {

// What a driver does after an action.
enum class Next { kContinue, kStop };

class StepAction {
 public:
  enum class Phase {
    kSend,     // the forward request (Execute, a chained step's Send)
    kAsk,      // a question about a forward request's outcome (Reconcile)
    kUndo,     // the compensation (Compensate)
    kAskUndo,  // a question about a compensation's outcome
  };
  using MarkPtr = std::shared_ptr<StepMark>;
  using Clock = std::chrono::steady_clock;

  StepAction(std::string id, SagaDefinitionPtr def, int step, MarkPtr mark, TraceContext trace,
             Completion<Next> done);
  StepAction(const StepAction&) = delete;
  StepAction& operator=(const StepAction&) = delete;

  const std::string& id() const { return id_; }
  const SagaDefinitionPtr& def() const { return def_; }
  int step() const { return step_; }
  const StepDefinition& step_def() const { return def_->steps[step_]; }
  // What an action in this phase is, for messages ("a send", "an undo").
  const char* what() const;
  // The idempotency key it sends or asks about, and that send's attempt.
  const std::string& key() const { return key_; }
  int attempt() const { return attempt_; }
  const TraceContext& trace() const { return trace_; }
  // The step's mark (held until End or MoveOn).
  const MarkPtr& mark() const { return mark_; }
  // When its request left (for the call's duration).
  Clock::time_point sent_at() const { return sent_at_; }
  bool ended() const { return ended_; }
  // Aborts unless it is still under way and holds its step's mark (before
  // it acts on the step: sends, asks or records).
  void CheckHeld() const;

  // What it does next: the phase, and the key and attempt of that request.
  void Begin(Phase phase, std::string key, int attempt);
  // The service's reservation, held until FreePermit (the reply is in) or End.
  void Hold(ServiceGates::Permit permit) { permit_ = std::move(permit); }
  void FreePermit() { permit_.reset(); }
  void Sent(Clock::time_point at) { sent_at_ = at; }
  void MoveOn(SagaDefinitionPtr def, StepMark mark);
  void End(Next next);

 private:
  // CheckHeld, naming `what` was about to happen.
  void Check(const char* what) const;

  const std::string id_;
  SagaDefinitionPtr def_;
  int step_;
  Phase phase_ = Phase::kSend;
  std::string key_;
  int attempt_ = 0;
  const TraceContext trace_;
  MarkPtr mark_;
  std::optional<ServiceGates::Permit> permit_;
  Clock::time_point sent_at_{};
  Completion<Next> done_;
  bool ended_ = false;
};

}  // namespace sagad
