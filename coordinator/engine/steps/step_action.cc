#include "coordinator/engine/steps/step_action.h"

#include <utility>

#include "util/check.h"

namespace sagad {

StepAction::StepAction(std::string id, SagaDefinitionPtr def, int step, MarkPtr mark,
                       TraceContext trace, Completion<Next> done)
    : id_(std::move(id)),
      def_(std::move(def)),
      step_(step),
      trace_(std::move(trace)),
      mark_(std::move(mark)),
      done_(std::move(done)) {
  Check("an action");
}

void StepAction::CheckHeld() const { Check(what()); }

void StepAction::Check(const char* what) const {
  // Only the action that holds the step's mark acts on it: no other one
  // reconciles or re-sends a request still in flight (run_table.h).
  SAGAD_CHECK(!ended_ && mark_ && mark_->step() == step_ && mark_->instance_id() == id_)
      << "instance " << id_ << " step " << step_ << ": " << what << " without the step's mark";
}

const char* StepAction::what() const {
  switch (phase_) {
    case Phase::kSend:
      return "a send";
    case Phase::kAsk:
      return "a question";
    case Phase::kUndo:
      return "an undo";
    case Phase::kAskUndo:
      return "a question about an undo";
  }
  return "an action";
}

void StepAction::Begin(Phase phase, std::string key, int attempt) {
  phase_ = phase;
  key_ = std::move(key);
  attempt_ = attempt;
}

void StepAction::MoveOn(SagaDefinitionPtr def, StepMark mark) {
  SAGAD_CHECK(!ended_) << "instance " << id_ << ": an ended action moves on";
  const int next = mark.step();
  mark_->Release();  // its step's outcome is recorded
  mark_ = std::make_shared<StepMark>(std::move(mark));
  def_ = std::move(def);
  step_ = next;
  permit_.reset();
  Check("a chained send");
}

void StepAction::End(Next next) {
  if (ended_) return;  // an action ends once (an exception after its end)
  ended_ = true;
  permit_.reset();  // nothing left out: the service's slot is free
  Completion<Next> done = std::move(done_);
  done(next);
  mark_->Release();
}

}  // namespace sagad
