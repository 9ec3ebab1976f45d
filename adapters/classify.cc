#include "adapters/classify.h"

#include "util/json_limits.h"

namespace sagad {

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kCommitted:
      return "committed";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kNotExecuted:
      return "not_executed";
    case Outcome::kUnknown:
      return "unknown";
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

const char* QueryOutcomeName(QueryOutcome o) {
  switch (o) {
    case QueryOutcome::kHappened:
      return "happened";
    case QueryOutcome::kNotHappened:
      return "not_happened";
    case QueryOutcome::kRefused:
      return "refused";
    case QueryOutcome::kUnknown:
      return "unknown";
  }
  return "?";
}

namespace {

// What the body of a 200 answer says of the original request; kHappened
// when it says nothing.
QueryOutcome StoredOutcome(const nlohmann::json& body, std::string* why) {
  if (!body.is_object()) return QueryOutcome::kHappened;
  QueryOutcome by_word = QueryOutcome::kHappened, by_status = QueryOutcome::kHappened;
  bool has_word = false, has_status = false;
  if (auto it = body.find("outcome"); it != body.end()) {
    has_word = true;
    std::string w = it->is_string() ? it->get<std::string>() : "";
    if (w == "committed")
      by_word = QueryOutcome::kHappened;
    else if (w == "refused")
      by_word = QueryOutcome::kRefused;
    else if (w == "in_progress") {
      *why = "the downstream says the operation is still in progress";
      return QueryOutcome::kUnknown;
    } else {
      *why = "reconciliation answer has an unrecognised outcome " + DumpJson(*it);
      return QueryOutcome::kUnknown;
    }
  }
  if (auto it = body.find("http_status"); it != body.end()) {
    has_status = true;
    int st = it->is_number_integer() ? it->get<int>() : 0;
    if (st >= 200 && st < 300)
      by_status = QueryOutcome::kHappened;
    else if (st >= 400 && st < 500 && st != 408 && st != 409 && st != 429)
      by_status = QueryOutcome::kRefused;
    else {
      *why = "the original request was answered with " + DumpJson(*it) + " (outcome still unclear)";
      return QueryOutcome::kUnknown;
    }
  }
  if (has_word && has_status && by_word != by_status) {
    *why = "reconciliation answer contradicts itself (outcome " + DumpJson(body["outcome"]) +
           ", http_status " + DumpJson(body["http_status"]) + ")";
    return QueryOutcome::kUnknown;
  }
  return has_word ? by_word : by_status;
}

}  // namespace

QueryResult ClassifyQueryAnswer(int status, const nlohmann::json& body) {
  QueryResult out;
  if (status == 404) {
    out.outcome = QueryOutcome::kNotHappened;
    return out;
  }
  if (status != 200) {
    out.error = "reconciliation query: HTTP " + std::to_string(status);
    return out;
  }
  out.outcome = StoredOutcome(body, &out.error);
  if (out.outcome == QueryOutcome::kRefused) {
    out.error = "the downstream says the request was refused";
    if (body.contains("http_status")) out.error += " (HTTP " + DumpJson(body["http_status"]) + ")";
    for (const char* f : {"detail", "error", "message"})
      if (body.contains(f)) {
        out.error += ": " + (body[f].is_string() ? body[f].get<std::string>() : DumpJson(body[f]));
        break;
      }
  } else if (out.outcome == QueryOutcome::kHappened) {
    bool wrapped = body.is_object() && body.contains("result") &&
                   (body.contains("outcome") || body.contains("http_status"));
    out.result = wrapped ? body["result"] : body;
    out.external_ref = ExternalRef(out.result);
  }
  return out;
}

std::string ReplyError(int status, const std::string& body) {
  return "HTTP " + std::to_string(status) + ": " + SanitizeUtf8(body.substr(0, 512));
}

QueryResult ClassifyReadAnswer(const CallResult& read, const std::string& committed_if) {
  QueryResult q;
  if (read.outcome != Outcome::kCommitted) {
    q.error = "reconcile read " + std::string(OutcomeName(read.outcome)) + ": " + read.error;
    return q;
  }
  bool found = false;
  try {
    found = read.result.contains(nlohmann::json::json_pointer(committed_if));
  } catch (const nlohmann::json::exception&) {
    found = false;  // a pointer through a value of another type: not there
  }
  if (!found) {
    q.outcome = QueryOutcome::kNotHappened;
    q.error = "reconcile read: " + committed_if + " is not in its result";
    return q;
  }
  q.outcome = QueryOutcome::kHappened;
  q.result = read.result;
  q.external_ref = read.external_ref;
  return q;
}

}  // namespace sagad
