#include "adapters/trace_context.h"

#include <random>

#include "util/mutex.h"

namespace sagad {
namespace {

std::string RandomHex(size_t digits) {
  static Mutex mu;
  static std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32)};
  static const char* kHex = "0123456789abcdef";
  std::string out;
  MutexLock l(mu);
  while (out.size() < digits) {
    uint64_t r = rng();
    for (int i = 0; i < 16 && out.size() < digits; ++i, r >>= 4) out += kHex[r & 15];
  }
  if (out.find_first_not_of('0') == std::string::npos) out.back() = '1';  // never all zero
  return out;
}

bool IsHex(const std::string& s, size_t n) {
  return s.size() == n && s.find_first_not_of("0123456789abcdef") == std::string::npos &&
         s.find_first_not_of('0') != std::string::npos;
}

}  // namespace

nlohmann::json TraceContext::ToJson() const {
  nlohmann::json j = {{"trace_id", trace_id}, {"flags", flags}};
  if (!parent_span_id.empty()) j["parent_span_id"] = parent_span_id;
  if (!tracestate.empty()) j["tracestate"] = tracestate;
  return j;
}

TraceContext TraceContext::FromJson(const nlohmann::json& j) {
  TraceContext t;
  if (!j.is_object()) return t;
  t.trace_id = j.value("trace_id", "");
  t.parent_span_id = j.value("parent_span_id", "");
  t.flags = j.value("flags", "01");
  t.tracestate = j.value("tracestate", "");
  return t;
}

TraceContext TraceFromHeaders(const std::string& traceparent, const std::string& tracestate) {
  TraceContext t;
  // Version "00": 00-<32 hex>-<16 hex>-<2 hex>, exactly; a later version
  // may add fields after these, which are ignored.
  const std::string& h = traceparent;
  auto hex = [](const std::string& x) {
    return x.find_first_not_of("0123456789abcdef") == std::string::npos;
  };
  const std::string version = h.substr(0, 2);
  bool ok = h.size() >= 55 && hex(version) && version != "ff" && h[2] == '-' && h[35] == '-' &&
            h[52] == '-' && IsHex(h.substr(3, 32), 32) && IsHex(h.substr(36, 16), 16) &&
            hex(h.substr(53, 2)) &&
            (version == "00" ? h.size() == 55 : h.size() == 55 || h[55] == '-');
  if (ok) {
    t.trace_id = h.substr(3, 32);
    t.parent_span_id = h.substr(36, 16);
    t.flags = h.substr(53, 2);
    if (tracestate.size() <= 512) t.tracestate = tracestate;
  } else {
    t.trace_id = RandomHex(32);
  }
  return t;
}

std::string OutgoingTraceparent(const TraceContext& trace) {
  return "00-" + trace.trace_id + "-" + RandomHex(16) + "-" +
         (trace.flags.empty() ? "01" : trace.flags);
}

}  // namespace sagad
