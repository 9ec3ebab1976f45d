#include "coordinator/http/api_exchange.h"

#include <cctype>
#include <limits>

#include "adapters/sha256.h"
#include "coordinator/store/store_fault.h"
#include "sagas/saga_machine.h"
#include "sagas/schema_errors.h"
#include "util/check.h"
#include "util/json_limits.h"
#include "util/log.h"

namespace sagad {

const char* Title(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Content";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return status >= 500 ? "Internal Server Error" : "Error";
  }
}

void Problem(const HttpRequest& req, HttpResponse& res, int status, const std::string& detail,
             const nlohmann::json& extra) {
  nlohmann::json p = {{"type", "about:blank"},
                      {"title", Title(status)},
                      {"status", status},
                      {"detail", detail},
                      {"instance", req.path}};
  if (extra.is_object()) p.update(extra);
  res.status = status;
  res.set_content(DumpJson(p), "application/problem+json");
}

void SchemaProblem(const HttpRequest& req, HttpResponse& res, int status, const std::string& what,
                   const std::string& whole, const std::vector<SchemaError>& errors) {
  nlohmann::json list = nlohmann::json::array();
  for (const SchemaError& e : errors) list.push_back({{"path", e.path}, {"message", e.message}});
  Problem(req, res, status, what + ": " + DescribeSchemaErrors(errors, whole), {{"errors", list}});
}

std::string RequestHash(KeyedRequest kind, const std::string& name, const nlohmann::json& body) {
  switch (kind) {
    case KeyedRequest::kSubmission:
      return Sha256Hex(name + "\n" + CanonicalJson(body));
    case KeyedRequest::kRunOpening:
      return Sha256Hex("run\n" + name + "\n" + CanonicalJson(body));
    case KeyedRequest::kMcpSession:
      return Sha256Hex("mcp\n" + name + "\n" + CanonicalJson(body));
  }
  SAGAD_CHECK(false) << "no such keyed request";
  return "";
}

int HttpStatusOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 422;
    case StatusCode::kFailedPrecondition:
    case StatusCode::kLeaseLost:
    case StatusCode::kMovedOn:
    case StatusCode::kAborted:
      return 409;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kResourceExhausted:
      return 429;
    default:
      return 500;
  }
}

void ProblemFromStatus(const HttpRequest& req, HttpResponse& res, const Status& s) {
  const int code = s.ok() ? 500 : HttpStatusOf(s);
  if (code == 503) res.set_header("Retry-After", "1");
  if (code == 500) {
    // What went wrong inside (a store's own error text, SQL included) is
    // for the log, not for the client.
    std::string ref = NewErrorReference();
    EngineLog(LogLevel::kError, {{"msg", "internal error"},
                                 {"path", req.path},
                                 {"error", s.ToString()},
                                 {"reference", ref}});
    Problem(req, res, code, "internal error (" + ref + " in the coordinator's log)",
            {{"reference", ref}});
    return;
  }
  Problem(req, res, code, s.message());
}

bool IsSagaStatus(const std::string& s) {
  SagaStatus parsed;
  return s == "OPEN" || ParseSagaStatus(s, &parsed);  // the machine's own names; a run's OPEN
}

bool IsWaitingFor(const std::string& s) { return s == "retry" || s == "approval" || s == "review"; }

void Json(HttpResponse& res, int status, const nlohmann::json& j) {
  res.status = status;
  res.set_content(DumpJson(j), "application/json");
}

// "application/json", optionally with parameters ("; charset=utf-8").
bool IsJsonContentType(const std::string& value) {
  std::string media = value.substr(0, value.find(';'));
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.pop_back();
  for (char& c : media) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return media == "application/json";
}

// Parses the request body as a JSON object ({} when empty). False (and a
// problem response) when it is not.
bool BodyObject(const HttpRequest& req, HttpResponse& res, nlohmann::json* out, bool allow_empty) {
  // A POST says it is JSON, even with an empty body: a cross-site form or
  // no-cors fetch cannot, so no other site can ride a loopback sagad. A
  // bodiless request that carries a bearer token (which no cross-site
  // request can) needs no Content-Type.
  const bool bodiless_with_token = req.body.empty() && allow_empty &&
                                   !req.has_header("Content-Type") &&
                                   req.get_header_value("Authorization").rfind("Bearer ", 0) == 0;
  if (!bodiless_with_token && !IsJsonContentType(req.get_header_value("Content-Type"))) {
    Problem(req, res, 415,
            req.body.empty() ? "Content-Type must be application/json (with no body too, unless "
                               "the request carries a bearer token: it keeps other web sites "
                               "from posting to sagad)"
                             : "Content-Type must be application/json");
    return false;
  }
  if (req.body.empty() && allow_empty) {
    *out = nlohmann::json::object();
    return true;
  }
  if (!JsonDepthWithin(req.body)) {
    Problem(req, res, 400,
            "request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    return false;
  }
  *out = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    Problem(req, res, 400, "request body is not valid JSON");
    return false;
  }
  if (!out->is_object()) {
    Problem(req, res, 400, "request body must be a JSON object");
    return false;
  }
  if (std::string at = DuplicateKey(req.body); !at.empty()) {
    Problem(req, res, 400, "key " + SanitizeUtf8(at) + " appears twice in the request body");
    return false;
  }
  if (std::string at = FindNul(*out); !at.empty()) {
    Problem(req, res, 400, "U+0000 is not allowed in a JSON string (at " + SanitizeUtf8(at) + ")");
    return false;
  }
  return true;
}

bool OptionalString(const HttpRequest& req, HttpResponse& res, const nlohmann::json& j,
                    const char* field, std::string* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_string()) {
    Problem(req, res, 400, std::string("'") + field + "' must be a string");
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

bool UntilParam(const HttpRequest& req, HttpResponse& res, bool* decided) {
  *decided = false;
  if (!req.has_param("until")) return true;
  const std::string v = req.get_param_value("until");
  if (v == "decided" || v == "settled") {
    *decided = v == "decided";
    return true;
  }
  Problem(req, res, 400, "until must be 'settled' (the default) or 'decided'");
  return false;
}

// ?wait=SECONDS; -1 when absent, false on a malformed value.
bool WaitParam(const HttpRequest& req, HttpResponse& res, double* seconds) {
  *seconds = -1;
  if (!req.has_param("wait")) return true;
  std::string v = req.get_param_value("wait");
  // Decimal digits with at most one point: strtod alone would also take
  // "inf", "nan", "0x10" and "1e3".
  const bool decimal = !v.empty() && v.size() <= 32 &&
                       v.find_first_not_of("0123456789.") == std::string::npos &&
                       v.find('.') == v.rfind('.') && v != ".";
  char* end = nullptr;
  double d = decimal ? std::strtod(v.c_str(), &end) : -1;
  if (!decimal || *end != '\0' || !(d >= 0)) {
    Problem(req, res, 400,
            "wait must be a non-negative decimal number of seconds (e.g. 10 or 2.5)");
    return false;
  }
  *seconds = std::min(d, kMaxWaitSeconds);
  return true;
}

// Compares without an early exit, so timing does not reveal a prefix match.
bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::string& x = a.size() == b.size() ? b : a;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ x[i]);
  return diff == 0;
}

// Framing and encoding checks made before a request is routed (its body is
// not read yet). An empty string when the request may go on, else why not.
std::string RefuseBeforeRouting(const HttpRequest& req) {
  size_t lengths = req.get_header_value_count("Content-Length");
  if (lengths > 1) return "more than one Content-Length header";
  if (lengths == 1) {
    std::string v = req.get_header_value("Content-Length");
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
      return "Content-Length must be one decimal number";
    if (req.has_header("Transfer-Encoding"))
      return "a request may not carry both Content-Length and Transfer-Encoding";
  }
  if (!IsValidUtf8(req.path)) return "the request path is not valid UTF-8 once percent-decoded";
  for (const auto& [k, v] : req.params)
    if (!IsValidUtf8(k) || !IsValidUtf8(v))
      return "query parameter '" + SanitizeUtf8(k) + "' is not valid UTF-8 once percent-decoded";
  const std::string key = req.get_header_value("Idempotency-Key");
  if (!IsValidUtf8(key)) return "Idempotency-Key is not valid UTF-8";
  for (unsigned char c : key)
    if (c < 0x20 || c == 0x7f) return "Idempotency-Key contains a control character";
  return "";
}

// A page cursor is an instance id, as NewInstanceId makes them: 12 hex
// digits, '-', 16 hex digits.
bool ValidCursor(const std::string& c) {
  if (c.empty()) return true;
  if (c.size() != 29 || c[12] != '-') return false;
  for (size_t i = 0; i < c.size(); ++i)
    if (i != 12 && !std::isxdigit(static_cast<unsigned char>(c[i]))) return false;
  return true;
}

// A positive 32-bit version from text; false when it is anything else.
bool ParseVersion(const std::string& v, int* out) {
  if (v.empty() || v.size() > 10 || v.find_first_not_of("0123456789") != std::string::npos)
    return false;
  long long n = std::stoll(v);
  if (n < 1 || n > std::numeric_limits<int>::max()) return false;
  *out = static_cast<int>(n);
  return true;
}

}  // namespace sagad
