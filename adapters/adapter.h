// Adapter: the only way sagad talks to downstream services. One call is one
// logical operation attempt carrying a stable idempotency key; the adapter
// classifies what came back (docs/downstream-protocol.md). Reconciliation
// asks the downstream whether the operation with a key happened.
// Thread-safety: implementations must be safe for concurrent calls.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "adapters/trace_context.h"
#include "policies/retry_budget.h"
#include "policies/retry_policy.h"
#include "util/status.h"

namespace sagad {

// How to reach and treat one downstream service (config "services").
struct ServiceConfig {
  std::string name;
  std::string base_url;  // http://host:port[/prefix]
  int timeout_ms = 5000;
  std::map<std::string, std::string> headers;
  bool queryable = true;   // answers GET <operations_path>
  bool idempotent = true;  // deduplicates by Idempotency-Key
  std::string operations_path = "/operations/{key}";
  // Replies with a larger body are not read: the outcome is UNKNOWN (a
  // forward call is then reconciled), never stored.
  size_t max_response_bytes = size_t(1) << 20;
  // HTTPS: a CA bundle to verify the service with (else the system's), a
  // client certificate and key for mutual TLS. Verification is on unless
  // tls_verify is explicitly false (logged as a warning at start).
  std::string ca_file, client_cert_file, client_key_file;
  bool tls_verify = true;
  RetryPolicy retry;               // default for the steps that call it
  RetryBudgetConfig retry_budget;  // token bucket shared by its re-sends
  // New sends at once, and per second (0: unlimited); see ServiceGates.
  int max_in_flight = 0;
  // Connections the HTTP client opens to it at once: one request each; a
  // request beyond waits, unsent, for one (its timeout_ms starts then).
  int max_connections = 64;
  double max_per_second = 0;
  // An MCP server (config "mcp_servers", adapters/mcp_adapter.h): called
  // with tool calls (CallSpec::IsMcp), never asked by key.
  bool mcp = false;
};

enum class Outcome {
  kCommitted,    // 2xx: it happened; body is the result
  kFailed,       // definite rejection (4xx): it did not and will not happen
  kNotExecuted,  // nothing was done (429, connection refused): retry later
  kUnknown,      // may or may not have happened (timeout, reset, 5xx, 408, 409)
};
const char* OutcomeName(Outcome o);

struct CallRequest {
  std::string service;
  std::string method;
  std::string path;             // rendered, relative to the service base URL
  nlohmann::json body;          // null: no body
  std::string idempotency_key;  // empty: a reconcile read, which carries none
  std::string instance_id;
  std::string step;
  uint64_t fencing_token = 0;
  int attempt = 1;     // sent as Saga-Attempt (1 for the first send of the key)
  TraceContext trace;  // sent as traceparent (a new span id per attempt) + tracestate
  // Optional: asked immediately before the request is written to the
  // socket (after any wait in the service's connection line); not ok: the
  // request is never written and the call ends withheld (CallResult). The
  // engine's lease rule: a request that waited in line while its lease ran
  // out must not leave. Called on the adapter's thread; must not block.
  std::function<Status()> may_write;
};

struct CallResult {
  Outcome outcome = Outcome::kUnknown;
  int http_status = 0;       // 0 when no response arrived
  nlohmann::json result;     // parsed 2xx body (or {"raw": text})
  std::string external_ref;  // "ref" or "id" of the result
  std::string error;         // human-readable reason when not committed
  bool replayed = false;     // downstream said Idempotent-Replayed: true
  // CallRequest::may_write refused it: nothing was written (outcome
  // kNotExecuted, error says why).
  bool withheld = false;
};

enum class QueryOutcome {
  kHappened,     // it took effect (result is the step's result)
  kNotHappened,  // it did not: re-send with the same key
  kRefused,      // it was received and definitely refused: FAILED, no re-send
  kUnknown,      // still unclear (or in progress): ask again later
};
const char* QueryOutcomeName(QueryOutcome o);

struct QueryResult {
  QueryOutcome outcome = QueryOutcome::kUnknown;
  nlohmann::json result;
  std::string external_ref;
  std::string error;
};

class Adapter {
 public:
  using CallDone = std::function<void(CallResult)>;
  using QueryDone = std::function<void(QueryResult)>;

  virtual ~Adapter() = default;
  // Sends one attempt. Never throws; every failure is classified.
  virtual CallResult Call(const CallRequest& req) = 0;
  // Call and Query without waiting: `done` gets what they would return,
  // exactly once, on a thread of the adapter's (an adapter with an event
  // loop: nothing waits for the downstream), or, by default, before
  // CallAsync returns (the blocking call made on the caller's thread: the
  // simulator's adapter, test doubles). `done` may block (the engine records
  // the outcome durably there): an adapter calls it only on a thread that
  // other work does not wait for.
  virtual void CallAsync(const CallRequest& req, CallDone done) { done(Call(req)); }
  virtual void QueryAsync(const std::string& service, const std::string& key,
                          const std::string& instance_id, uint64_t fencing_token, int attempt,
                          const TraceContext& trace, QueryDone done) {
    done(Query(service, key, instance_id, fencing_token, attempt, trace));
  }
  // Asks whether the operation with `key` happened (GET operations path).
  // `attempt` is the latest attempt sent (header Saga-Attempt): a downstream
  // may use it to refuse that attempt if it arrives after the question.
  virtual QueryResult Query(const std::string& service, const std::string& key,
                            const std::string& instance_id, uint64_t fencing_token, int attempt,
                            const TraceContext& trace) = 0;
  // The service's configuration, or nullptr if it is not configured.
  virtual const ServiceConfig* Service(const std::string& name) const = 0;
  // Every configured service's name, sorted.
  virtual std::vector<std::string> ServiceNames() const { return {}; }
};

using AdapterPtr = std::unique_ptr<Adapter>;

}  // namespace sagad
