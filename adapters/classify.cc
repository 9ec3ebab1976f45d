#include "adapters/classify.h"
#include "sagas/json_limits.h"

namespace sagad {

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kCommitted: return "committed";
    case Outcome::kFailed: return "failed";
    case Outcome::kNotExecuted: return "not_executed";
    case Outcome::kUnknown: return "unknown";
  }
  return "?";
}

Outcome ClassifyHttpStatus(int status) {
  if (status >= 200 && status < 300) return Outcome::kCommitted;
  if (status == 429) return Outcome::kNotExecuted;
  if (status == 408 || status == 409) return Outcome::kUnknown;
  if (status >= 400 && status < 500) return Outcome::kFailed;
  return Outcome::kUnknown;
}

Outcome ClassifyTransportError(bool request_sent) {
  return request_sent ? Outcome::kUnknown : Outcome::kNotExecuted;
}

std::string ExternalRef(const nlohmann::json& result) {
  if (!result.is_object()) return "";
  for (const char* f : {"ref", "id"}) {
    auto it = result.find(f);
    if (it == result.end() || it->is_null()) continue;
    return it->is_string() ? it->get<std::string>() : DumpJson(*it);
  }
  return "";
}

QueryOutcome ClassifyQueryStatus(int status) {
  if (status == 200) return QueryOutcome::kHappened;
  if (status == 404) return QueryOutcome::kNotHappened;
  return QueryOutcome::kUnknown;
}

}  // namespace sagad
