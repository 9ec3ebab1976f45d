// Submissions: new instances, and the client's Idempotency-Key.
//
// Submit checks the input against the definition (an object, with every
// field the templates require), then writes the instance's first event, its
// first lease (this process) and, with a key, the submission record, in one
// durable write; then `schedule` starts its driver. With a key:
// - the same request again (same hash) is a replay: the first instance, and
//   the response first given if there was one (FinishSubmission stored it);
// - another request under the same key is AlreadyExists (HTTP 422);
// - while the first is still being answered, FailedPrecondition (409).
// Two processes sharing a store race on the key in the store: the loser
// replays the winner's instance.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_set>

#include "adapters/trace_context.h"
#include "coordinator/engine/callbacks.h"
#include "coordinator/engine/instances/step_mark.h"
#include "coordinator/engine/steps/step_request.h"
#include "coordinator/engine/submit_outcome.h"
#include "coordinator/store/store.h"
#include "sagas/definition.h"
#include "sagas/instance.h"
#include "util/clock.h"
#include "util/in_flight.h"
#include "util/mutex.h"
#include "util/random.h"

namespace sagad {

class DefinitionRegistry;
class InstanceRepository;
class Ownership;
class Tx;

class Submissions {
 public:
  // How a new instance starts (the Driver, through the engine).
  class Starter {
   public:
    // May add to the creating transition the STARTED record of a first step
    // that may go at once: *step is that step's mark, else empty (the
    // default: none rides).
    virtual Status FirstStep(Tx& tx, const SagaDefinition& def, StepMark* step,
                             StepRequest* request);
    // After the creation commit: `created` true, send the marked step (if
    // any) and/or plan the instance; false (refused): nothing is sent and
    // the mark goes with `step`.
    virtual void StartCreated(const std::string& id, const SagaDefinitionPtr& def, StepMark step,
                              StepRequest* request, const TraceContext& trace, bool created) = 0;

   protected:
    ~Starter() = default;
  };

  // New instance ids are the time and 64 bits drawn from `random`.
  Submissions(const DefinitionRegistry& defs, InstanceRepository& repo, Ownership& ownership,
              const Clock& clock, Starter& starter, Random& random = SystemRandom::Shared());

  // `version` 0: the newest registered. NotFound (unknown saga or version),
  // InvalidArgument (input not an object, or missing required fields).
  // With `run_metadata`: a run of the toolbox `saga` (sagas/toolbox.h),
  // OPEN with no calls, keeping the metadata (an object) the agent gave.
  // `by`: the principal creating it, its owner (recorded in its creation).
  // Nothing waits for the creation's commit: `done` gets the outcome
  // through the repository's hand-off (a worker), or inside this call when
  // it fails or replays before any write.
  void SubmitAsync(const std::string& saga, int version, const nlohmann::json& input,
                   const std::string& client_key, const std::string& request_hash,
                   const TraceContext& trace, const nlohmann::json* run_metadata,
                   const std::string& by, Completion<StatusOr<SubmitOutcome>> done);
  // Stores the response given for `key` (the first one stands; status 0:
  // none was given, nothing to store) and ends its in-flight window once
  // that write is done, then runs `then` (if set): on the store's thread,
  // or inside this call. Never waits for the write. For an empty key: `then`
  // at once.
  void Finish(const std::string& key, int status, const nlohmann::json& response,
              Task then = nullptr);
  // Returns once every response write begun by Finish has completed (its
  // `then` returned): what keeps this object alive for the store's thread.
  void WaitIdle();
  ~Submissions() { WaitIdle(); }

 private:
  // One submission from its checks to the end of its creation's commit.
  struct Creation {
    std::string saga, key, hash, id;
    SagaDefinitionPtr def;
    TraceContext trace;
    std::optional<SubmitOutcome> replay;  // the key's first instance: nothing to write
    std::optional<Submission> sub;        // with a key
    Instance inst;
    std::vector<Event> events;  // the creation, and what rode with it
    std::vector<OperationRecord> ops;
    StepMark first;  // a first step whose STARTED rides in the creation
    StepRequest request;
    Lease lease;
  };
  // The checks (a replay ends there: c->replay) and the first events of
  // the new instance; an error ends the submission (End has run).
  Status Begin(const std::string& saga, int version, const nlohmann::json& input,
               const std::string& client_key, const std::string& request_hash,
               const TraceContext& trace, const nlohmann::json* run_metadata, const std::string& by,
               Creation* c);
  // After the creation's commit (`s`): the driver started, or what was
  // taken released; the outcome.
  StatusOr<SubmitOutcome> End(Creation& c, const Status& s);
  // The answer to a repeated key: the first instance, or AlreadyExists if
  // the key came with another request.
  static StatusOr<SubmitOutcome> Replay(const Submission& first, const std::string& request_hash);
  void EndInflight(const std::string& key);
  // The definition `saga`@`version` (0: the newest), with `input` checked
  // against it: NotFound or InvalidArgument naming what is wrong.
  // A run's definition: the toolbox's settings, no steps.
  StatusOr<SagaDefinitionPtr> RunDefinitionFor(const std::string& toolbox, int version,
                                               const nlohmann::json& input) const;
  StatusOr<SagaDefinitionPtr> DefinitionFor(const std::string& saga, int version,
                                            const nlohmann::json& input) const;

  const DefinitionRegistry& defs_;
  InstanceRepository& repo_;
  Ownership& ownership_;
  const Clock& clock_;
  Random& random_;
  Starter& starter_;
  Mutex mu_;
  std::unordered_set<std::string> inflight_ GUARDED_BY(mu_);
  InFlight writing_;  // response writes under way
};

}  // namespace sagad
