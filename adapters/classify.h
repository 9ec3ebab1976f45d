// Outcome classification of DESIGN.md, as pure functions (tested alone).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

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

// Reconciliation answer: 200 happened, 404 not happened, else unknown.
QueryOutcome ClassifyQueryStatus(int status);

}  // namespace sagad
