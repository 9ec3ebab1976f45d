// EngineMetrics: what the engine counts, by name and label, and the
// Prometheus text of it with the gauges read from the store at scrape time.
// Every counter whose label values are known up front is exported at 0 from
// the first scrape, so rate(...{outcome="unknown"}[5m]) and the like work
// before the first incident. Names, labels and HELP texts are a contract
// (docs/operations.md, "Metrics"; dashboards and alerts use them).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "adapters/adapter.h"
#include "coordinator/engine/metrics/metrics.h"
#include "coordinator/engine/services/service_gates.h"
#include "coordinator/store/store.h"
#include "sagas/definition.h"

namespace sagad {

class EngineMetrics {
 public:
  EngineMetrics();

  // Where a call went: the saga, its step and the step's service (label
  // values bounded by the registered definitions). A run's call is counted
  // by its toolbox and tool (`tool` set), never by its call_id: no label
  // value is one a client chooses.
  struct StepLabels {
    StepLabels(std::string saga_, std::string step_, std::string service_, std::string tool_ = "",
               bool run_ = false)
        : saga(std::move(saga_)),
          step(std::move(step_)),
          service(std::move(service_)),
          tool(std::move(tool_)),
          run(run_) {}
    std::string saga, step, service, tool;
    bool run;
  };
  // The labels of step `sd` of `def` (a run's call: its toolbox and tool).
  static StepLabels LabelsOf(const SagaDefinition& def, const StepDefinition& sd,
                             const std::string& service);
  // A downstream call of `phase` ("forward" | "compensation") and its
  // classified outcome; a replayed answer counts as a duplicate detected.
  // Counted twice: by phase and outcome (sagad_step_calls_total), and by
  // saga, step and service (sagad_step_calls_by_step_total,
  // sagad_step_call_seconds, sagad_compensations_total).
  void Call(const char* phase, const CallResult& res, std::chrono::steady_clock::duration took,
            const StepLabels& where);
  // A question about an unclear outcome, and its answer.
  void Query(const char* phase, const QueryResult& q);
  // A request held back by the lease rule (Ownership::ReadyToSend).
  void SendWithheld();
  // One write transaction of a transition (lost races included).
  void CommitAttempt(std::chrono::steady_clock::duration took);
  // The events of a committed transition (by type; escalations; re-sends).
  void Committed(const std::vector<Event>& events);
  void RetryBudgetExhausted(const std::string& service);
  // A toolbox's guard refused a call or held it for an operator (`verdict`
  // "refused" or "held"); labels named by the toolbox, never by a client.
  void Guarded(const std::string& toolbox, const std::string& guard, const char* verdict);
  void RetentionDeleted(size_t n);
  void RecoveryLatency(double seconds);

  // The exposition: counters, histograms, and the gauges `store` answers
  // (unfinished instances by saga and status, synced commits, outbox
  // backlog) and the longest commit so far.
  std::string Text(Store& store) const;
  // The gauges of each downstream service: calls in flight, steps queued
  // for a permit, paused (1) or not (0).
  static std::string ServicesText(const std::vector<ServiceGates::View>& services);
  // The gauges of what this process holds in memory per instance: wake-ups
  // pending (a timer each) and instances cached. Both follow what is in
  // flight: a finished instance has neither.
  static std::string MemoryText(size_t wakeups, size_t timers, size_t cached);

  // A counter's current value (tests).
  double Get(const std::string& name, const std::string& labels = "") const {
    return metrics_.Get(name, labels);
  }

 private:
  Metrics metrics_;
  std::atomic<double> max_commit_seconds_{0};  // raised by compare-and-swap
};

}  // namespace sagad
