// The event types of an instance's log besides the step and saga machines'
// own (StepEventName, SagaEventName in step_machine.h, saga_machine.h): the
// instance's creation, a run's appended call, and the step notes that change
// no machine state. Each has one text, written here and nowhere else; the
// texts are in every stored log, so they never change.
#pragma once

#include <cstddef>
#include <string>

namespace sagad {

enum class StepNote {
  kReconciled,      // a query about an unclear outcome settled nothing (counted)
  kRetryDeferred,   // the service's retry budget is empty: the re-send waits
                    // for the token it reserved
  kRetryRequested,  // an operator asked for a retry now (resets the retries)
};
constexpr StepNote kLastStepNote = StepNote::kRetryRequested;
const char* StepNoteName(StepNote n);
// Parses a name produced by StepNoteName; false if it is not a step note.
bool ParseStepNote(const std::string& type, StepNote* out);

// The first event of every instance.
inline constexpr char kInstanceCreatedEvent[] = "instance_created";
// A run's new call (a step named by its call id).
inline constexpr char kCallAppendedEvent[] = "call_appended";
// A value a run's agent computed (a model's answer), kept under its
// decision_id: the first one recorded answers every later ask.
inline constexpr char kDecisionRecordedEvent[] = "decision_recorded";
// The most decisions one run keeps.
inline constexpr size_t kMaxDecisions = 256;

}  // namespace sagad
