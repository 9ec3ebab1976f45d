// The API's side of one HTTP exchange, shared by its handlers: what it
// reads from a request (a JSON object body, optional fields, ?wait, a page
// cursor, a version, framing and encoding checks before routing) and how it
// answers (JSON, application/problem+json per RFC 9457, a Status as the
// matching problem). Each check that fails has already written its problem
// into the response.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "coordinator/http/http_message.h"
#include "sagas/json_schema.h"
#include "util/status.h"

namespace sagad {

constexpr double kMaxWaitSeconds = 300;

// The reason phrase of an HTTP status used by the API.
const char* Title(int status);
// A problem+json response: type, title, status, detail, instance (the path).
// `extra` members (an object) are added to the problem (e.g. "errors").
void Problem(const HttpRequest& req, HttpResponse& res, int status, const std::string& detail,
             const nlohmann::json& extra = nullptr);
// A problem naming each schema error: detail "<what>: <path> <message>; ..."
// (the first few; `whole` names the value itself), and "errors": [{path,
// message}] (all of them).
void SchemaProblem(const HttpRequest& req, HttpResponse& res, int status, const std::string& what,
                   const std::string& whole, const std::vector<SchemaError>& errors);
// The hash an Idempotency-Key's first request is kept with: a later request
// under the key that hashes otherwise is refused (422), one that hashes alike
// is a replay. One form per kind of keyed request, built here only; the
// forms are those stored hashes were always made in (a change would turn
// every replay after an upgrade into a refusal): a submission hashes its
// saga and body, a run's opening "run", its toolbox and body, an MCP
// session's opening "mcp", its toolbox and input.
enum class KeyedRequest { kSubmission, kRunOpening, kMcpSession };
std::string RequestHash(KeyedRequest kind, const std::string& name, const nlohmann::json& body);
// The HTTP status a Status maps to: 200 (ok), 400, 404, 409, 422, 503, 500.
int HttpStatusOf(const Status& s);
// The problem a Status maps to (400, 404, 409, 422, 503 with Retry-After, 500).
void ProblemFromStatus(const HttpRequest& req, HttpResponse& res, const Status& s);
void Json(HttpResponse& res, int status, const nlohmann::json& j);
// "application/json", optionally with parameters ("; charset=utf-8").
bool IsJsonContentType(const std::string& value);
// The body as a JSON object ({} when empty and allowed); 415 unless the
// request says it is JSON, 400 when it is not an object of bounded depth.
bool BodyObject(const HttpRequest& req, HttpResponse& res, nlohmann::json* out, bool allow_empty);
// j[field] into *out when it is a string; absent or null leaves *out; 400 else.
bool OptionalString(const HttpRequest& req, HttpResponse& res, const nlohmann::json& j,
                    const char* field, std::string* out);
// ?wait=SECONDS (capped at kMaxWaitSeconds); -1 when absent, false on a bad value.
bool WaitParam(const HttpRequest& req, HttpResponse& res, double* seconds);
// ?until=settled (the default: terminal, in review or awaiting an
// operator) or ?until=decided (past AWAITING_APPROVAL too); false with a 400
// on any other value.
bool UntilParam(const HttpRequest& req, HttpResponse& res, bool* decided);
// Compares without an early exit, so timing does not reveal a prefix match.
bool ConstantTimeEquals(const std::string& a, const std::string& b);
// Framing and encoding checks made before a request is routed: empty when it
// may go on, else why not.
std::string RefuseBeforeRouting(const HttpRequest& req);
// A page cursor is empty or an instance id (hex-hex, as instances are named).
bool ValidCursor(const std::string& c);
// A positive 32-bit version from text; false when it is anything else.
bool ParseVersion(const std::string& v, int* out);
// The filters of a listing and a bulk action: a saga status (RUNNING, ...,
// NEEDS_REVIEW) and what an instance waits for (retry, approval, review).
bool IsSagaStatus(const std::string& s);
bool IsWaitingFor(const std::string& s);

}  // namespace sagad
