#include "coordinator/client/client.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "sagas/template.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

using json = nlohmann::json;

// What an HTTP status means to a caller (client.h has the table).
StatusCode CodeOfHttp(int status) {
  switch (status) {
    case 400:
    case 413:
    case 415:
    case 422:
      return StatusCode::kInvalidArgument;
    case 401:
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 409:
      return StatusCode::kFailedPrecondition;
    case 429:
      return StatusCode::kResourceExhausted;
    case 503:
      return StatusCode::kUnavailable;
    default:
      return StatusCode::kInternal;
  }
}

// "409 Conflict: <detail>" from a problem answer (or its raw body).
Status FromProblem(int status, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  std::string detail = j.is_object() ? j.value("detail", body) : body;
  std::string title = j.is_object() ? j.value("title", "") : "";
  return Status(CodeOfHttp(status),
                std::to_string(status) + (title.empty() ? "" : " " + title) + ": " + detail);
}

// A key for a submission the caller gave none: random, so that the
// client's own retries are deduplicated and nothing else is.
std::string NewKey() {
  std::random_device rd;
  std::mt19937_64 gen((uint64_t(rd()) << 32) ^ rd());
  char buf[40];
  snprintf(buf, sizeof buf, "client-%016llx%016llx", static_cast<unsigned long long>(gen()),
           static_cast<unsigned long long>(gen()));
  return buf;
}

std::string Query(const ListQuery& q) {
  std::string out = "?limit=" + std::to_string(q.limit);
  auto add = [&](const std::string& k, const std::string& v) {
    if (!v.empty()) out += "&" + k + "=" + PercentEncode(v);
  };
  add("status", q.status);
  add("saga", q.saga);
  add("waiting", q.waiting);
  add("idempotency_key", q.idempotency_key);
  add("cursor", q.cursor);
  for (const auto& [field, value] : q.input)
    out += "&input." + PercentEncode(field) + "=" + PercentEncode(value);
  return out;
}

json WithText(const char* key, const std::string& text) {
  json body = json::object();
  if (!text.empty()) body[key] = text;
  return body;
}

}  // namespace

StatusOr<std::string> PathSegment(const std::string& name) {
  if (name.empty() || name == "." || name == "..")
    return InvalidArgument("'" + name + "' is not a valid instance, saga, step or service name");
  return PercentEncode(name);
}

Client::Client(ClientOptions options) : options_(std::move(options)) {}

StatusOr<json> Client::Call(const std::string& method, const std::string& path, const json& body,
                            const std::map<std::string, std::string>& headers) {
  const std::string& url = options_.url;
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    return InvalidArgument("the URL must start with http:// or https://, got '" + url + "'");
  httplib::Client cli(url);
  if (!options_.ca_file.empty()) cli.set_ca_cert_path(options_.ca_file);
  cli.set_connection_timeout(options_.connect_timeout_ms / 1000,
                             (options_.connect_timeout_ms % 1000) * 1000);
  cli.set_read_timeout(options_.read_timeout_ms / 1000, (options_.read_timeout_ms % 1000) * 1000);
  httplib::Request req;
  req.method = method;
  req.path = path;
  if (!options_.token.empty()) req.headers.emplace("Authorization", "Bearer " + options_.token);
  for (const auto& [k, v] : headers) req.headers.emplace(k, v);
  if (!body.is_null()) {
    req.body = DumpJson(body);
    req.headers.emplace("Content-Type", "application/json");
  }
  auto res = cli.send(req);
  if (!res)
    return Unavailable("cannot reach sagad at " + url + " (" + httplib::to_string(res.error()) +
                       ")");
  if (res->status >= 400) return FromProblem(res->status, res->body);
  json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded()) return Internal("sagad answered something that is not JSON");
  return j;
}

StatusOr<json> Client::Named(const std::string& method, const std::string& prefix,
                             const std::string& name, const std::string& suffix, const json& body) {
  auto seg = PathSegment(name);
  if (!seg.ok()) return seg.status();
  return Call(method, prefix + *seg + suffix, body);
}

StatusOr<json> Client::Submit(const std::string& saga, const json& input,
                              const std::string& idempotency_key, int wait_s, int version) {
  auto seg = PathSegment(saga);
  if (!seg.ok()) return seg.status();
  std::string path = "/v1/sagas/" + *seg + "/instances";
  if (wait_s > 0) path += "?wait=" + std::to_string(wait_s);
  json body = {{"input", input}};
  if (version > 0) body["version"] = version;
  const std::map<std::string, std::string> headers = {
      {"Idempotency-Key", idempotency_key.empty() ? NewKey() : idempotency_key}};
  StatusOr<json> out = Unavailable("not sent");
  for (int attempt = 0; attempt < std::max(1, options_.submit_attempts); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
    out = Call("POST", path, body, headers);
    if (out.ok() || out.status().code() != StatusCode::kUnavailable) break;
  }
  return out;
}

StatusOr<json> Client::Get(const std::string& id) { return Wait(id, 0); }

StatusOr<json> Client::Wait(const std::string& id, int seconds) {
  return Named("GET", "/v1/instances/", id, seconds > 0 ? "?wait=" + std::to_string(seconds) : "");
}

StatusOr<json> Client::List(const ListQuery& query) {
  return Call("GET", "/v1/instances" + Query(query));
}

StatusOr<json> Client::Events(const std::string& id) {
  return Named("GET", "/v1/instances/", id, "/events");
}

StatusOr<json> Client::Bundle(const std::string& id) {
  return Named("GET", "/v1/instances/", id, "/bundle");
}

StatusOr<json> Client::Receipt(const std::string& id) {
  return Named("GET", "/v1/instances/", id, "/receipt");
}

StatusOr<json> Client::Decide(const std::string& run, const std::string& decision_id,
                              const json& value) {
  return Named("POST", "/v1/instances/", run, "/decisions",
               {{"decision_id", decision_id}, {"value", value}});
}

StatusOr<json> Client::Approvals() { return Call("GET", "/v1/approvals"); }

StatusOr<json> Client::StepAction(const std::string& id, const std::string& step,
                                  const std::string& action, const json& body) {
  auto i = PathSegment(id);
  if (!i.ok()) return i.status();
  auto s = PathSegment(step);
  if (!s.ok()) return s.status();
  return Call("POST", "/v1/instances/" + *i + "/steps/" + *s + "/" + action, body);
}

StatusOr<json> Client::Approve(const std::string& id, const std::string& step,
                               const std::string& comment) {
  return StepAction(id, step, "approve", WithText("comment", comment));
}

StatusOr<json> Client::Reject(const std::string& id, const std::string& step,
                              const std::string& reason) {
  return StepAction(id, step, "reject", WithText("reason", reason));
}

StatusOr<json> Client::Resolve(const std::string& id, const std::string& step,
                               const std::string& outcome, const std::string& external_ref,
                               const std::string& comment) {
  json body = WithText("comment", comment);
  body["outcome"] = outcome;
  if (!external_ref.empty()) body["external_ref"] = external_ref;
  return StepAction(id, step, "resolve", body);
}

StatusOr<json> Client::Retry(const std::string& id, const std::string& step,
                             const std::string& comment) {
  return StepAction(id, step, "retry", WithText("comment", comment));
}

StatusOr<json> Client::Skip(const std::string& id, const std::string& step, const json& result,
                            const std::string& external_ref, const std::string& comment) {
  json body = WithText("comment", comment);
  body["result"] = result;
  if (!external_ref.empty()) body["external_ref"] = external_ref;
  return StepAction(id, step, "skip", body);
}

StatusOr<json> Client::Cancel(const std::string& id, const std::string& reason) {
  return Named("POST", "/v1/instances/", id, "/cancel", WithText("reason", reason));
}

StatusOr<json> Client::Compensate(const std::string& id, const std::string& reason) {
  return Named("POST", "/v1/instances/", id, "/compensate", WithText("reason", reason));
}

StatusOr<json> Client::Bulk(const std::string& action, const json& targets,
                            const std::string& text) {
  json body = targets.is_object() ? targets : json::object();
  if (!text.empty()) body[action == "reject" || action == "cancel" ? "reason" : "comment"] = text;
  return Named("POST", "/v1/instances/actions/", action, "", body);
}

StatusOr<json> Client::ApproveSeen(const json& cards, const std::string& comment) {
  json list = json::array();
  for (const auto& c : cards)
    if (c.is_object())
      list.push_back({{"instance_id", c.value("instance_id", "")},
                      {"step", c.value("step", "")},
                      {"digest", c.value("digest", json()).is_string() ? c["digest"] : json("")}});
  json body = {{"approvals", list}};
  if (!comment.empty()) body["comment"] = comment;
  return Call("POST", "/v1/approvals/actions/approve", body);
}

StatusOr<json> Client::Sagas() { return Call("GET", "/v1/sagas"); }

StatusOr<json> Client::Definition(const std::string& saga, int version) {
  return Named("GET", "/v1/sagas/", saga, "/versions/" + std::to_string(version));
}

StatusOr<json> Client::Deploy(const json& definition) {
  if (!definition.is_object() || !definition.contains("name") || !definition["name"].is_string() ||
      !definition.contains("version") || !definition["version"].is_number_integer())
    return InvalidArgument("a definition needs \"name\" (a string) and \"version\" (an integer)");
  const bool toolbox = definition.value("kind", nlohmann::json()) == "toolbox";
  return Named("PUT", toolbox ? "/v1/toolboxes/" : "/v1/sagas/",
               definition["name"].get<std::string>(),
               "/versions/" + std::to_string(definition["version"].get<int64_t>()), definition);
}

StatusOr<json> Client::Services() { return Call("GET", "/v1/services"); }

StatusOr<json> Client::PauseService(const std::string& name, const std::string& reason) {
  return Named("POST", "/v1/services/", name, "/pause", WithText("reason", reason));
}

StatusOr<json> Client::ResumeService(const std::string& name) {
  return Named("POST", "/v1/services/", name, "/resume", json::object());
}

}  // namespace sagad
