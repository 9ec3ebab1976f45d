// sagad::Client: the C++ client of sagad's HTTP API (what sagactl is built
// on, and what a service written in C++ uses to submit and watch sagas).
//
//   sagad::Client c({.url = "https://sagad.internal:8443", .token = "..."});
//   auto inst = c.Submit("order_fulfilment", {{"order", "A-17"}}, "order-A-17");
//   if (!inst.ok()) std::cerr << inst.status().ToString() << "\n";
//
// Every call answers the server's JSON, or a Status whose message is
// "<HTTP status> <title>: <the problem's detail>" (e.g. "409 Conflict: step
// 'x' is not awaiting approval") and whose code says what it means:
//   400, 413, 415, 422  kInvalidArgument     401, 403  kPermissionDenied
//   404                 kNotFound            409       kFailedPrecondition
//   503, no answer      kUnavailable         other     kInternal
//
// Submit is safe to retry: it always sends an Idempotency-Key (the caller's,
// or one it makes up), and when the request may not have arrived (no answer,
// a connection error, 503) it sends it again with the same key, up to
// `submit_attempts` times: the server answers the first instance, never a
// second one. Other calls are not retried (an operator's action is the
// operator's to repeat).
//
// Thread-safety: a Client may be used from several threads at once (each
// call opens its own connection).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "util/status.h"

namespace sagad {

struct ClientOptions {
  std::string url = "http://127.0.0.1:8080";  // http:// or https://
  std::string token;                          // bearer token; empty: none
  std::string ca_file;                        // https:// with a private CA
  int connect_timeout_ms = 5000;
  int read_timeout_ms = 330000;  // more than the longest ?wait= (300 s)
  int submit_attempts = 3;
};

// GET /v1/instances: every field optional; `input` holds business keys
// (top-level input field -> value).
struct ListQuery {
  std::string status, saga, waiting, idempotency_key, cursor;
  std::map<std::string, std::string> input;
  int limit = 50;
};

class Client {
 public:
  explicit Client(ClientOptions options);

  // POST /v1/sagas/{saga}/instances. `wait_s` > 0 waits (server side) until
  // the instance ends or needs a human; `version` 0 is the newest.
  StatusOr<nlohmann::json> Submit(const std::string& saga, const nlohmann::json& input,
                                  const std::string& idempotency_key = "", int wait_s = 0,
                                  int version = 0);
  StatusOr<nlohmann::json> Get(const std::string& id);
  // The instance once it settled (ended, or waits for a human), or as it is
  // when `seconds` ran out.
  StatusOr<nlohmann::json> Wait(const std::string& id, int seconds);
  StatusOr<nlohmann::json> List(const ListQuery& query);
  StatusOr<nlohmann::json> Events(const std::string& id);
  StatusOr<nlohmann::json> Bundle(const std::string& id);
  // The instance's receipt: its decisions, calls and approvals as a hash
  // chain (VerifyReceipt in coordinator/engine/instances/receipt.h checks
  // one).
  StatusOr<nlohmann::json> Receipt(const std::string& id);
  // POST /v1/instances/{run}/decisions: the decision as recorded (the first
  // value under `decision_id`, whatever `value` is now).
  StatusOr<nlohmann::json> Decide(const std::string& run, const std::string& decision_id,
                                  const nlohmann::json& value);
  StatusOr<nlohmann::json> Approvals();

  StatusOr<nlohmann::json> Approve(const std::string& id, const std::string& step,
                                   const std::string& comment = "");
  StatusOr<nlohmann::json> Reject(const std::string& id, const std::string& step,
                                  const std::string& reason = "");
  // `outcome`: "committed" or "not_executed".
  StatusOr<nlohmann::json> Resolve(const std::string& id, const std::string& step,
                                   const std::string& outcome, const std::string& external_ref = "",
                                   const std::string& comment = "");
  StatusOr<nlohmann::json> Retry(const std::string& id, const std::string& step,
                                 const std::string& comment = "");
  StatusOr<nlohmann::json> Skip(const std::string& id, const std::string& step,
                                const nlohmann::json& result, const std::string& external_ref = "",
                                const std::string& comment = "");
  StatusOr<nlohmann::json> Cancel(const std::string& id, const std::string& reason = "");
  StatusOr<nlohmann::json> Compensate(const std::string& id, const std::string& reason = "");
  // POST /v1/instances/actions/{action}: `targets` is {"ids": [...]} or
  // {"filter": {...}, "limit": N}; `text` the comment or reason.
  StatusOr<nlohmann::json> Bulk(const std::string& action, const nlohmann::json& targets,
                                const std::string& text = "");
  // POST /v1/approvals/actions/approve: exactly the approval cards given
  // (as Approvals() listed them: instance_id, step, digest) whose request
  // is still the one seen; a 409 (FailedPrecondition) lists the others.
  StatusOr<nlohmann::json> ApproveSeen(const nlohmann::json& cards,
                                       const std::string& comment = "");

  StatusOr<nlohmann::json> Sagas();
  StatusOr<nlohmann::json> Definition(const std::string& saga, int version);
  // PUT /v1/sagas/{name}/versions/{version} of the definition's own name
  // and version (/v1/toolboxes/... when it says "kind": "toolbox").
  StatusOr<nlohmann::json> Deploy(const nlohmann::json& definition);
  StatusOr<nlohmann::json> Services();
  StatusOr<nlohmann::json> PauseService(const std::string& name, const std::string& reason = "");
  StatusOr<nlohmann::json> ResumeService(const std::string& name);

  // Any request: `path` with its query, segments already percent-encoded.
  StatusOr<nlohmann::json> Call(const std::string& method, const std::string& path,
                                const nlohmann::json& body = nullptr,
                                const std::map<std::string, std::string>& headers = {});

  const ClientOptions& options() const { return options_; }

 private:
  // METHOD prefix + `name` as one percent-encoded path segment + suffix.
  StatusOr<nlohmann::json> Named(const std::string& method, const std::string& prefix,
                                 const std::string& name, const std::string& suffix,
                                 const nlohmann::json& body = nullptr);
  StatusOr<nlohmann::json> StepAction(const std::string& id, const std::string& step,
                                      const std::string& action, const nlohmann::json& body);

  ClientOptions options_;
};

// One path segment from a name: percent-encoded; "", "." and ".." refused.
StatusOr<std::string> PathSegment(const std::string& name);

}  // namespace sagad
