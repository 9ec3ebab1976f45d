#include "coordinator/engine/metrics/engine_metrics.h"

#include <algorithm>
#include <map>

#include "sagas/event_types.h"
#include "sagas/saga_machine.h"
#include "sagas/step_machine.h"

namespace sagad {

EngineMetrics::EngineMetrics() {
  metrics_.Describe("sagad_step_calls_total", "counter",
                    "Downstream calls by phase (forward/compensation) and "
                    "classified outcome.");
  metrics_.Describe("sagad_reconciliations_total", "counter",
                    "Questions about unclear outcomes, by phase and answer.");
  metrics_.Describe("sagad_events_total", "counter",
                    "Committed instance events by type (escalations: saga_needs_review).");
  metrics_.Describe("sagad_duplicate_effects_detected_total", "counter",
                    "Calls a downstream answered as an idempotent replay.");
  metrics_.Describe("sagad_recovery_latency_seconds", "histogram",
                    "From sagad start to the first transition of each recovered instance.");
  metrics_.Describe("sagad_step_latency_seconds", "histogram", "Downstream call latency.");
  metrics_.Describe("sagad_step_calls_by_step_total", "counter",
                    "Downstream calls by saga, step, service, phase and classified outcome.");
  metrics_.Describe("sagad_step_call_seconds", "histogram",
                    "Downstream call latency by saga, step, service and phase.", true);
  metrics_.Describe("sagad_compensations_total", "counter",
                    "Compensation calls by saga, step, service and classified outcome.");
  metrics_.Describe("sagad_tool_calls_total", "counter",
                    "Calls of agent runs by toolbox, tool, phase and classified outcome "
                    "(never by call_id or run).");
  metrics_.Describe("sagad_guard_verdicts_total", "counter",
                    "Calls of agent runs a toolbox's guard refused or held for an operator, by "
                    "toolbox, guard and verdict (refused | held).");
  metrics_.Describe("sagad_escalations_total", "counter", "Instances sent to NEEDS_REVIEW.");
  metrics_.Describe("sagad_store_commit_seconds", "histogram",
                    "Store commits of a transition, queueing in the group "
                    "commit and the durable write (LMDB: fsync; PostgreSQL: "
                    "WAL flush) included.");
  metrics_.Describe("sagad_retries_total", "counter", "Re-sends of a forward step (same key).");
  metrics_.Describe("sagad_retry_budget_exhausted_total", "counter",
                    "Retries deferred because the service's retry budget was empty.");
  metrics_.Describe("sagad_sends_withheld_total", "counter",
                    "Requests not sent because this coordinator's lease had less than a "
                    "third of lease_ms left and could not be renewed (lost, or the store "
                    "too slow); the STARTED record is reconciled, never guessed.");
  metrics_.Inc("sagad_sends_withheld_total", "", 0);
  metrics_.Describe("sagad_retention_deleted_total", "counter",
                    "Finished instances deleted by retention (with their events, operation "
                    "records and submission keys).");
  // Known at 0 from the first scrape.
  for (const char* phase : {"forward", "compensation"}) {
    for (Outcome o :
         {Outcome::kCommitted, Outcome::kFailed, Outcome::kNotExecuted, Outcome::kUnknown})
      metrics_.Inc("sagad_step_calls_total",
                   std::string("phase=\"") + phase + "\",outcome=\"" + OutcomeName(o) + "\"", 0);
    for (const char* answer : {"happened", "not_happened", "refused", "unknown"})
      metrics_.Inc("sagad_reconciliations_total",
                   std::string("phase=\"") + phase + "\",answer=\"" + answer + "\"", 0);
  }
  std::vector<std::string> types = {kInstanceCreatedEvent};
  for (int k = 0; k <= static_cast<int>(kLastStepNote); ++k)
    types.push_back(StepNoteName(static_cast<StepNote>(k)));
  for (int k = 0; k <= static_cast<int>(StepEvent::kConfirmRefused); ++k)
    types.push_back(StepEventName(static_cast<StepEvent>(k)));
  for (int k = 0; k <= static_cast<int>(SagaEvent::kEscalate); ++k)
    types.push_back(SagaEventName(static_cast<SagaEvent>(k)));
  for (const auto& t : types) metrics_.Inc("sagad_events_total", "type=\"" + t + "\"", 0);
  for (const char* name : {"sagad_duplicate_effects_detected_total", "sagad_escalations_total",
                           "sagad_retries_total", "sagad_retention_deleted_total"})
    metrics_.Inc(name, "", 0);
}

namespace {

// A Prometheus label value: backslash, double quote and newline escaped.
std::string LabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

EngineMetrics::StepLabels EngineMetrics::LabelsOf(const SagaDefinition& def,
                                                  const StepDefinition& sd,
                                                  const std::string& service) {
  StepLabels l{def.name, sd.name, service, sd.tool, def.run};
  if (l.run && l.tool.empty()) l.tool = "unknown";
  return l;
}

void EngineMetrics::Call(const char* phase, const CallResult& res,
                         std::chrono::steady_clock::duration took, const StepLabels& where) {
  const std::string outcome = OutcomeName(res.outcome);
  const double secs = std::chrono::duration<double>(took).count();
  metrics_.Inc("sagad_step_calls_total",
               std::string("phase=\"") + phase + "\",outcome=\"" + outcome + "\"");
  if (res.replayed) metrics_.Inc("sagad_duplicate_effects_detected_total");
  metrics_.Observe("sagad_step_latency_seconds", secs);
  // A run's call: its toolbox and tool (sagad_tool_calls_total), and the
  // tool in the step's place below; never its call_id.
  const std::string step_name = where.run ? where.tool : where.step;
  if (where.run)
    metrics_.Inc("sagad_tool_calls_total", "toolbox=\"" + LabelValue(where.saga) + "\",tool=\"" +
                                               LabelValue(where.tool) + "\",phase=\"" + phase +
                                               "\",outcome=\"" + outcome + "\"");
  const std::string step = "saga=\"" + LabelValue(where.saga) + "\",step=\"" +
                           LabelValue(step_name) + "\",service=\"" + LabelValue(where.service) +
                           "\"";
  metrics_.Inc("sagad_step_calls_by_step_total",
               step + ",phase=\"" + phase + "\",outcome=\"" + outcome + "\"");
  metrics_.Observe("sagad_step_call_seconds", secs, step + ",phase=\"" + phase + "\"");
  if (std::string(phase) == "compensation")
    metrics_.Inc("sagad_compensations_total", step + ",outcome=\"" + outcome + "\"");
}

void EngineMetrics::Query(const char* phase, const QueryResult& q) {
  const char* answer = QueryOutcomeName(q.outcome);
  metrics_.Inc("sagad_reconciliations_total",
               std::string("phase=\"") + phase + "\",answer=\"" + answer + "\"");
}

void EngineMetrics::SendWithheld() { metrics_.Inc("sagad_sends_withheld_total"); }

void EngineMetrics::CommitAttempt(std::chrono::steady_clock::duration took) {
  double secs = std::chrono::duration<double>(took).count();
  metrics_.Observe("sagad_store_commit_seconds", secs);
  double seen = max_commit_seconds_.load(std::memory_order_relaxed);
  while (secs > seen && !max_commit_seconds_.compare_exchange_weak(seen, secs)) {
  }
}

void EngineMetrics::Committed(const std::vector<Event>& events) {
  for (const Event& e : events) {
    metrics_.Inc("sagad_events_total", "type=\"" + e.type + "\"");
    if (e.type == "saga_needs_review") metrics_.Inc("sagad_escalations_total");
    if (e.type == "started" && e.data.value("attempt", 1) > 1) metrics_.Inc("sagad_retries_total");
  }
}

void EngineMetrics::RetryBudgetExhausted(const std::string& service) {
  metrics_.Inc("sagad_retry_budget_exhausted_total", "service=\"" + service + "\"");
}

void EngineMetrics::Guarded(const std::string& toolbox, const std::string& guard,
                            const char* verdict) {
  metrics_.Inc("sagad_guard_verdicts_total", "toolbox=\"" + LabelValue(toolbox) + "\",guard=\"" +
                                                 LabelValue(guard) + "\",verdict=\"" + verdict +
                                                 "\"");
}

void EngineMetrics::RetentionDeleted(size_t n) {
  metrics_.Inc("sagad_retention_deleted_total", "", static_cast<double>(n));
}

void EngineMetrics::RecoveryLatency(double seconds) {
  metrics_.Observe("sagad_recovery_latency_seconds", seconds);
}

std::string EngineMetrics::ServicesText(const std::vector<ServiceGates::View>& services) {
  std::string in_flight =
      "# HELP sagad_service_in_flight Calls to the downstream service under way.\n"
      "# TYPE sagad_service_in_flight gauge\n";
  std::string queued =
      "# HELP sagad_service_queued Steps waiting for a permit of the service (paused, or at "
      "max_in_flight or max_per_second).\n"
      "# TYPE sagad_service_queued gauge\n";
  std::string paused =
      "# HELP sagad_service_paused 1 while an operator holds new sends to the service.\n"
      "# TYPE sagad_service_paused gauge\n";
  for (const auto& v : services) {
    const std::string label = "{service=\"" + LabelValue(v.name) + "\"} ";
    in_flight += "sagad_service_in_flight" + label + std::to_string(v.in_flight) + "\n";
    queued += "sagad_service_queued" + label + std::to_string(v.queued) + "\n";
    paused += "sagad_service_paused" + label + (v.paused ? "1" : "0") + "\n";
  }
  return in_flight + queued + paused;
}

std::string EngineMetrics::MemoryText(size_t wakeups, size_t timers, size_t cached) {
  return "# HELP sagad_wakeups_pending Instances this process will look at again at a set time "
         "(a deadline, an approval timeout, a run's idle timeout); a finished one has none.\n"
         "# TYPE sagad_wakeups_pending gauge\nsagad_wakeups_pending " +
         std::to_string(wakeups) +
         "\n# HELP sagad_timers_pending Cancellable timers set and not yet fired nor "
         "cancelled.\n# TYPE sagad_timers_pending gauge\nsagad_timers_pending " +
         std::to_string(timers) +
         "\n# HELP sagad_instances_cached Unfinished instances held in memory by this "
         "process.\n# TYPE sagad_instances_cached gauge\nsagad_instances_cached " +
         std::to_string(cached) + "\n";
}

std::string EngineMetrics::Text(Store& store) const {
  std::string extra;
  auto active = store.ListActive();
  if (active.ok()) {
    std::map<std::string, int> by;  // saga + status of every unfinished one
    for (const auto& a : *active) ++by["saga=\"" + a.saga + "\",status=\"" + a.status + "\""];
    extra +=
        "# HELP sagad_instances_active Instances not yet COMPLETED or "
        "COMPENSATED.\n"
        "# TYPE sagad_instances_active gauge\nsagad_instances_active " +
        std::to_string(active->size()) + "\n";
    extra +=
        "# HELP sagad_instances Unfinished instances by saga and status.\n"
        "# TYPE sagad_instances gauge\n";
    for (const auto& [labels, n] : by)
      extra += "sagad_instances{" + labels + "} " + std::to_string(n) + "\n";
  }
  extra +=
      "# HELP sagad_store_synced_commits_total Durable write transactions "
      "committed (LMDB: "
      "an fdatasync of the data file and a synchronous meta-page write each; "
      "PostgreSQL: "
      "one transaction and WAL flush each; group commit makes them fewer than "
      "transitions).\n"
      "# TYPE sagad_store_synced_commits_total "
      "counter\nsagad_store_synced_commits_total " +
      std::to_string(store.SyncedCommits()) + "\n";
  extra +=
      "# HELP sagad_store_stale_primary 1 while the store refuses the database server it "
      "found: an old primary that came back after a promotion (never written to).\n"
      "# TYPE sagad_store_stale_primary gauge\nsagad_store_stale_primary " +
      std::string(store.StalePrimary().empty() ? "0" : "1") + "\n";
  extra +=
      "# HELP sagad_store_commit_max_seconds Longest write transaction "
      "(writer lock held, fsync included).\n"
      "# TYPE sagad_store_commit_max_seconds "
      "gauge\nsagad_store_commit_max_seconds " +
      std::to_string(max_commit_seconds_.load()) + "\n";
  auto backlog = store.OutboxSize();
  if (backlog.ok())
    extra +=
        "# HELP sagad_outbox_backlog Outbox messages not yet delivered to "
        "every webhook.\n"
        "# TYPE sagad_outbox_backlog gauge\nsagad_outbox_backlog " +
        std::to_string(*backlog) + "\n";
  return metrics_.Render(extra);
}

}  // namespace sagad
