#include "coordinator/http/api_router.h"

#include "coordinator/http/api_exchange.h"
#include "util/json_limits.h"

namespace sagad {

void ApiRouter::Route(const std::string& method, std::vector<std::string> openapi_paths,
                      const std::string& pattern, Handler handler) {
  for (auto& p : openapi_paths) routes_.push_back(method + " " + p);
  Get(method, pattern, std::move(handler));
  table_.back().openapi_path = openapi_paths.empty() ? pattern : openapi_paths[0];
}

void ApiRouter::Get(const std::string& method, const std::string& pattern, Handler handler) {
  table_.push_back({method, std::regex(pattern), std::move(handler), "", {}});
}

void ApiRouter::TakesParams(const std::string& method, const std::string& openapi_path,
                            std::set<std::string> params) {
  for (Entry& r : table_)
    if (r.method == method && r.openapi_path == openapi_path) r.params = params;
}

// Empty when every query parameter is one the route takes; else the
// refusal naming them.
std::string ApiRouter::UnknownParams(const HttpRequest& req, const Entry& r) {
  if (r.openapi_path.empty()) return "";
  auto takes = [&r](const std::string& k) {
    if (r.params.count(k)) return true;
    // "prefix.*" takes every "prefix.NAME" with a NAME.
    for (const auto& p : r.params)
      if (p.size() > 2 && p.compare(p.size() - 2, 2, ".*") == 0 && k.size() > p.size() - 1 &&
          k.compare(0, p.size() - 1, p, 0, p.size() - 1) == 0)
        return true;
    return false;
  };
  std::string unknown;
  for (const auto& [k, v] : req.params)
    if (!takes(k) && unknown.find("'" + k + "'") == std::string::npos)
      unknown += (unknown.empty() ? "'" : ", '") + SanitizeUtf8(k) + "'";
  if (unknown.empty()) return "";
  std::string list;
  for (const auto& p : r.params) list += (list.empty() ? "" : ", ") + p;
  return "unknown query parameter " + unknown + " (" + r.method + " " + r.openapi_path +
         (list.empty() ? " takes none)" : " takes: " + list + ")");
}

void ApiRouter::Dispatch(HttpRequest& req, HttpResponse& res) const {
  std::string why = RefuseBeforeRouting(req);
  if (!why.empty()) {
    res.set_header("Connection", "close");
    return Problem(req, res, 400, why);
  }
  std::set<std::string> allowed;
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  for (const Entry& r : table_) {
    std::smatch m;
    if (!std::regex_match(req.path, m, r.pattern)) continue;
    if (r.method != method) {
      allowed.insert(r.method);
      if (r.method == "GET") allowed.insert("HEAD");
      continue;
    }
    if (std::string why = UnknownParams(req, r); !why.empty()) return Problem(req, res, 400, why);
    req.matches.assign(m.begin(), m.end());
    return r.handler(req, res);
  }
  if (!allowed.empty()) {
    std::string allow;
    for (const auto& a : allowed) allow += (allow.empty() ? "" : ", ") + a;
    res.set_header("Allow", allow);
    return Problem(req, res, 405, req.method + " is not allowed here; allowed: " + allow);
  }
  Problem(req, res, 404, "no such route: " + req.method + " " + req.path);
}

}  // namespace sagad
