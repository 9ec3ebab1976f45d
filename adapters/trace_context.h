// W3C Trace Context (https://www.w3.org/TR/trace-context/): a saga's trace
// comes from its submission's `traceparent` (or is started by sagad), and
// every downstream call carries `traceparent: 00-<trace id>-<new span id>-<flags>`
// with a new span id per attempt, and the submission's `tracestate`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sagad {

struct TraceContext {
  std::string trace_id;        // 32 lowercase hex, not all zero
  std::string parent_span_id;  // the caller's span (16 hex), empty when sagad started the trace
  std::string flags = "01";    // 2 hex
  std::string tracestate;      // passed through as received

  // {"trace_id", "parent_span_id", "flags", "tracestate"} (empty fields left out).
  nlohmann::json ToJson() const;
  static TraceContext FromJson(const nlohmann::json& j);
};

// The context of a request from its `traceparent` and `tracestate` headers;
// a missing or malformed traceparent starts a new trace (and drops
// tracestate, as the specification says).
TraceContext TraceFromHeaders(const std::string& traceparent, const std::string& tracestate);

// "00-<trace id>-<a new random span id>-<flags>" for one outgoing call.
std::string OutgoingTraceparent(const TraceContext& trace);

}  // namespace sagad
