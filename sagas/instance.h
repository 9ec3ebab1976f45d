// Instance: the state of one saga instance, derived only from its event log.
//
// Every change is an Event applied through Apply(), which drives the step and
// saga Boost.MSM machines (refusing transitions their tables do not allow)
// and updates the record fields (attempts, result, errors...). Replay() builds
// an Instance from its logged events; ToJson() is both the stored snapshot and
// the API view, so snapshot == replay can be checked at any time.
// Thread-safety: none; the engine serialises access per instance.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sagas/definition.h"
#include "sagas/saga_machine.h"
#include "sagas/settled.h"
#include "sagas/step_machine.h"
#include "util/status.h"

namespace sagad {

constexpr int kRecordSchemaVersion = 1;

struct Event {
  int64_t seq = 0;    // 1-based position in the instance's log
  int64_t at_ms = 0;  // wall clock when it was written
  // A StepEventName, a SagaEventName, or one of sagas/event_types.h: the
  // creation ("instance_created"), a run's call ("call_appended"), a step
  // note that changes no machine state (StepNoteName: "reconciled",
  // "retry_deferred", "retry_requested"). Any event's data may carry
  // "retry_at" (a durable timer).
  std::string type;
  std::string step;  // step name for step events, empty otherwise
  nlohmann::json data = nlohmann::json::object();

  nlohmann::json ToJson() const;
  static StatusOr<Event> FromJson(const nlohmann::json& j);
  // Who made it happen: the principal or operator its data names ("by":
  // the creator of an instance, the agent of a call, the operator of an
  // action), else "sagad" (the engine's own doing: sends, outcomes,
  // retries, timeouts).
  std::string By() const;
  // ToJson with "by" beside the type: the API's and the bundle's view.
  nlohmann::json ViewJson() const;
};

// What the coordinator knows about one step, beyond its machine's state.
struct StepState {
  std::string name;
  std::vector<int> after;  // indices of the steps it waits for (from the log)
  StepMachine machine;
  int attempts = 0;         // forward sends (STARTED records)
  int reconciliations = 0;  // queries of an unclear forward outcome
  int retries = 0;          // not-executed outcomes since the last success
  std::string key;          // forward idempotency key
  std::string args_hash;    // SHA-256 of the canonical forward body
  nlohmann::json result;    // forward result (2xx body)
  std::string external_ref;
  std::string last_error;
  nlohmann::json approval;  // {"by","at","comment"} once approved/rejected
  int comp_attempts = 0;
  int comp_reconciliations = 0;
  std::string comp_key;
  std::string comp_args_hash;
  nlohmann::json comp_result;
  std::string comp_external_ref;  // "ref" or "id" of comp_result (a refund's id)
  std::string comp_last_error;
  nlohmann::json resolution;  // operator resolution, if any
  int64_t first_sent_at = 0;  // wall ms of the first STARTED (step deadline)
  int64_t retry_at = 0;       // durable timer: not before this wall ms (0: now)
  int64_t approval_requested_at = 0;
  int64_t commit_seq = 0;  // seq of the event that committed it (0: not committed)
  // A forward send's outcome was unknown and nothing settled it since (a
  // commit, a refusal, an answer or an operator saying it did not happen):
  // a later send that was "not executed" says nothing about the earlier
  // one. Derived from the log; not part of the view.
  bool forward_in_doubt = false;
  // The step's next send takes no token of the service's retry budget: its
  // last event is a "retry_deferred" (the re-send reserved one and goes at
  // retry_at), or a "not_executed" marked "interrupted" (an attempt cut off
  // by a restart or a takeover, confirmed never received: not a failure of
  // the service). Derived from the log; not part of the view.
  bool budget_exempt = false;
  // This step's part of Instance::SnapshotText(), kept until an event of the
  // step (shared by copies: a transition rewrites only the steps it changed).
  std::shared_ptr<const std::string> view_text;
  // A run's call (from its "call_appended" event): tool, arguments, reason,
  // evidence, model, prompt_version; null for a saga's step.
  nlohmann::json call;

  StepStatus status() const { return machine.status(); }
};

class Instance {
 public:
  Instance() = default;

  // The first event of every instance. `trace` (optional): the W3C trace
  // context the instance's downstream calls continue ({"trace_id", ...}).
  // A run (def.run: a toolbox's settings, no steps) records that it is one
  // and the agent's `metadata` (an object: agent, model, prompt_version...).
  // `by`: the principal that created it (its owner; empty: none recorded).
  static Event CreatedEvent(const std::string& id, const SagaDefinition& def,
                            const nlohmann::json& input,
                            const nlohmann::json& trace = nlohmann::json(),
                            const nlohmann::json& metadata = nlohmann::json(),
                            const std::string& by = "");
  // Rebuilds an instance by replaying its log with no side effects.
  // InvalidArgument if the log is not a valid history for `def`.
  static StatusOr<Instance> Replay(const std::string& id, const SagaDefinition& def,
                                   const std::vector<Event>& events);
  // The same without a definition (the creation event names the steps).
  static StatusOr<Instance> Replay(const std::string& id, const std::vector<Event>& events);

  // Applies one event. On error the instance may be partially changed: apply
  // to a copy and keep it only if every event of a transition applied.
  Status Apply(const Event& e);

  const std::string& id() const { return id_; }
  const std::string& saga() const { return saga_; }
  int saga_version() const { return saga_version_; }
  const nlohmann::json& input() const { return input_; }
  // The trace context from the submission (null for instances from before).
  const nlohmann::json& trace() const { return trace_; }
  SagaStatus status() const { return machine_.status(); }
  // The status as views, stores and searches name it: SagaStatusName, but
  // "OPEN" for a run that is RUNNING (it waits for its agent's next call).
  const char* StatusName() const;
  // Needs nothing more from the engine right now (sagas/settled.h): a
  // settled status, or an OPEN run whose calls are each settled.
  bool Settled() const;
  // A run of a toolbox (sagas/toolbox.h): saga() names the toolbox, the
  // steps are its calls (event "call_appended"), run_definition() what the
  // planner and the engine run them by.
  bool is_run() const { return run_ != nullptr; }
  const SagaDefinitionPtr& run_definition() const { return run_; }
  const nlohmann::json& metadata() const { return metadata_; }
  // A run's decisions (event "decision_recorded"), in the order recorded:
  // each {"decision_id", "value", "model", "prompt_version", "by",
  // "recorded_at", "seq", "after_calls": how many calls the run had made
  // when it was recorded}; Decision: the one named `id`, or null.
  const std::vector<nlohmann::json>& decisions() const { return decisions_; }
  const nlohmann::json* Decision(const std::string& id) const;
  // The principal that created the instance (the token's name, "local"
  // without tokens): a run belongs to it. Empty for an instance created
  // before owners were recorded (then only operators see it).
  const std::string& owner() const { return owner_; }
  bool reviewing_compensation() const { return machine_.reviewing_compensation(); }
  const std::string& review_reason() const { return review_reason_; }
  int64_t created_at() const { return created_at_; }
  int64_t updated_at() const { return updated_at_; }
  int64_t last_seq() const { return last_seq_; }
  // Record version used for compare-and-swap; bumped by the store on commit.
  uint64_t version() const { return version_; }
  void set_version(uint64_t v) { version_ = v; }

  const std::vector<StepState>& steps() const { return steps_; }
  // REQUIRES: i < steps().size() (checked; a transition built from a stale
  // index is refused earlier, by Tx).
  const StepState& step(size_t i) const {
    if (i >= steps_.size()) NoSuchStep(i);
    return steps_[i];
  }
  int StepIndex(const std::string& name) const;

  // Snapshot / API view: id, saga, status, input, steps (each with its
  // `after`), timestamps, version, and why it waits: current_steps,
  // current_step (the first of them), waiting_for (approval | retry | review |
  // null), next_retry_at.
  nlohmann::json ToJson() const;
  // Step (a run's call) i as ToJson() shows it, alone.
  nlohmann::json StepView(size_t i) const { return StepJson(step(i)); }
  // DumpJson(ToJson()), byte for byte, without building the tree: the
  // input's, the trace's and each step's text are kept (and shared by
  // copies) until an event changes them, so a transition serialises only
  // what it changed. Not const: it fills those caches; call it on a copy no
  // other thread reads (the engine's copy of a transition, before it is
  // committed).
  std::string SnapshotText();
  // The steps the saga is at, lowest index first: going forward, those not
  // committed whose dependencies all committed; going back, those being
  // undone or in doubt, and the committed ones no committed dependent of
  // which waits to be undone. Empty when finished.
  std::vector<int> CurrentSteps() const;
  // The first of CurrentSteps(), or -1.
  int CurrentStep() const;
  // True if step `a` must commit before step `b` may start (directly or not).
  bool IsAncestor(int a, int b) const;
  // "approval", "retry", "review" or "" (running or finished).
  std::string WaitingFor() const;

 private:
  Status ApplyCreated(const Event& e);                 // the first event: what the instance is
  Status ApplyStepEvent(const Event& e);               // an event of one step
  Status ApplyRunCreated(const Event& e);              // instance_created of a run
  Status ApplyCallAppended(const Event& e);            // a run's new call (a new step)
  Status ApplyDecision(const Event& e);                // a run's recorded decision
  nlohmann::json StepJson(const StepState& st) const;  // one step of ToJson()
  nlohmann::json TopJson() const;                      // ToJson() without input, trace and steps

  // Aborts (a check that stays on), naming the instance and the index.
  [[noreturn]] void NoSuchStep(size_t i) const;

  std::string id_;
  std::string saga_;
  int saga_version_ = 0;
  nlohmann::json input_;
  nlohmann::json trace_;
  SagaDefinitionPtr run_;                  // a run's definition (its calls so far); null for a saga
  nlohmann::json metadata_;                // a run's metadata (null for a saga)
  std::vector<nlohmann::json> decisions_;  // a run's, in order
  std::string owner_;                      // instance_created's "by"
  // The texts of input_ and trace_ in SnapshotText() (set once, shared).
  std::shared_ptr<const std::string> input_text_, trace_text_, metadata_text_;
  SagaMachine machine_;
  std::vector<StepState> steps_;
  std::string review_reason_;
  int64_t created_at_ = 0;
  int64_t updated_at_ = 0;
  int64_t last_seq_ = 0;
  uint64_t version_ = 0;
};

}  // namespace sagad
