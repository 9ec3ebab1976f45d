// ServiceGates: whether a new request may go to a downstream service now.
//
// - Pause: an operator's pause holds every new send to the service (a step
//   stays PLANNED, or COMMITTED for its undo, and nothing is written); calls
//   already under way finish and reconciliation (asking) goes on. The set of
//   paused services comes from the store (durable, shared by every
//   coordinator of a PostgreSQL store) and is refreshed by the engine.
// - max_in_flight: at most that many requests of the service under way, each
//   from the moment its permit is taken (before its STARTED record is
//   written) until its reply; a released permit wakes the first step that
//   waits for one.
// - max_per_second: a token bucket holding one second's worth (at least 1).
// - retry_budget: a token bucket that re-sends (never first sends) draw
//   from, so a struggling service is not hammered by every saga's retries.
// A refused step is "waiting for" the service until it gets a permit or has
// not asked for 10 s (it asks again at least every second): its view names
// the service and GET /v1/services counts it as queued. A step whose
// service has neither limits nor a pause needs no permit.
// Time is read through the Clock only. Thread-safety: every method may be
// called from any thread; `wake` is called without the lock held.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "adapters/adapter.h"
#include "coordinator/engine/callbacks.h"
#include "policies/retry_budget.h"
#include "util/clock.h"
#include "util/mutex.h"

namespace sagad {

class ServiceGates {
 public:
  ServiceGates(const Adapter& adapter, const Clock& clock);
  // Who is woken when a permit is released or a service resumes.
  void SetWake(Wake wake);

  // One request's reservation; released when destroyed (or by Release).
  class Permit {
   public:
    Permit(Permit&& other) noexcept;
    Permit& operator=(Permit&& other) noexcept;
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit();
    void Release();

   private:
    friend class ServiceGates;
    Permit(ServiceGates* gates, std::string service)
        : gates_(gates), service_(std::move(service)) {}
    ServiceGates* gates_;
    std::string service_;
  };

  // A permit for step `step` of instance `id` to send to `service` now;
  // none when the service is paused or at one of its limits: then *retry_ms
  // says when to ask again at the latest (a released permit or a resume
  // wakes the instance sooner).
  std::optional<Permit> TryAcquire(const std::string& service, const std::string& id,
                                   const std::string& step, int64_t* retry_ms);
  // True when a send to `service` needs no permit: no limit, no pause.
  bool Open(const std::string& service) const;

  // The paused set as the store has it (replaces what was known).
  void SetPaused(const std::vector<std::string>& paused);
  void Pause(const std::string& service, bool paused);
  bool Paused(const std::string& service) const;
  // The service step `step` of `id` waits for, or "".
  std::string WaitingFor(const std::string& id, const std::string& step) const;

  // A re-send to `service` takes a token of its retry budget (its config's
  // retry_budget): 0 when it had one, else the milliseconds until the token
  // reserved for it is due (the re-send goes then, taking no other).
  int64_t ReserveRetry(const std::string& service);

  // Calls actually under way (every service, limited or not).
  void CallStarted(const std::string& service);
  void CallEnded(const std::string& service);

  struct View {
    std::string name;
    int max_in_flight = 0;      // 0: unlimited
    double max_per_second = 0;  // 0: unlimited
    int max_connections = 0;    // requests on the wire at once (the HTTP client's)
    bool paused = false;
    int in_flight = 0;  // calls under way now
    int queued = 0;     // steps waiting for a permit
  };
  // Every configured service (and any paused name), by name.
  std::vector<View> Views() const;

 private:
  struct Gate {
    bool paused = false;
    int reserved = 0;  // permits held
    int calls = 0;     // calls under way
    double tokens = 0;
    int64_t refilled_at = -1;
    std::vector<std::string> woken_next;      // instances waiting for a slot, oldest first
    std::optional<RetryBudget> retry_budget;  // made at the first re-send
  };
  struct Waiting {
    std::string service;
    int64_t asked_at = 0;
  };
  static constexpr int64_t kForgetWaitingMs = 10000;

  Gate& GateLocked(const std::string& service) REQUIRES(mu_);
  // Refills the bucket; true if a token was taken, else *retry_ms is set.
  bool TakeTokenLocked(Gate& g, double rate, int64_t now, int64_t* retry_ms) REQUIRES(mu_);
  void Released(const std::string& service);
  void NoteWaitingLocked(const std::string& service, const std::string& id, const std::string& step,
                         int64_t now) REQUIRES(mu_);
  int QueuedLocked(const std::string& service, int64_t now) const REQUIRES(mu_);

  const Adapter& adapter_;
  const Clock& clock_;
  mutable Mutex mu_;
  Wake wake_ GUARDED_BY(mu_);
  std::map<std::string, Gate> gates_ GUARDED_BY(mu_);
  std::map<std::string, Waiting> waiting_ GUARDED_BY(mu_);  // "id\nstep" -> service
  int64_t swept_at_ GUARDED_BY(mu_) = INT64_MIN / 2;
};

}  // namespace sagad
