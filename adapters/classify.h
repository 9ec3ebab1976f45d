// Outcome classification of the downstream protocol (docs/downstream-protocol.md), as pure
// functions (tested alone).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "adapters/adapter.h"

namespace sagad {

// 2xx committed; 429 not executed; 408, 409, 5xx unknown; other 4xx failed;
// anything else (1xx, 3xx) unknown.
Outcome ClassifyHttpStatus(int status);

// Transport failures: `request_sent` false (connection refused or connect
// timeout, nothing left us) -> not executed; true -> unknown.
Outcome ClassifyTransportError(bool request_sent);

// "ref" or "id" of a result object, as a string ("" if absent).
std::string ExternalRef(const nlohmann::json& result);

// The error recorded for a reply that is not a success: "HTTP <status>: "
// and the first 512 bytes of its body, with NUL and bytes that are not
// UTF-8 written as \xHH (a store may refuse them: PostgreSQL does NUL).
std::string ReplyError(int status, const std::string& body);

// Reconciliation answer (GET operations/{key}): 404 not happened; 200 with
// a JSON body that may say what the original request was answered with:
//   "outcome": "committed" | "refused" | "in_progress", and/or
//   "http_status": N (the original answer's status).
// "refused", or an http_status of 4xx other than 408/409/429: refused (the
// request was received and will never take effect). "in_progress", another
// http_status (408, 409, 429, 5xx, ...), an unknown outcome word or the two
// fields disagreeing: unknown (ask again later). 2xx or neither field:
// happened, and the result is the body's "result" member if present, else
// the body. Any other status: unknown. `error` says why, when not happened.
QueryResult ClassifyQueryAnswer(int status, const nlohmann::json& body);

// A step's reconcile read (sagas/definition.h ReconcileSpec) as an answer:
// committed with `committed_if` (a JSON Pointer) in its result: happened,
// the read's result the step's; committed without it: not happened; any
// other outcome (refused, not sent, unclear): unknown, ask again later.
QueryResult ClassifyReadAnswer(const CallResult& read, const std::string& committed_if);

}  // namespace sagad
