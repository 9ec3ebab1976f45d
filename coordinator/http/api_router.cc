#include "coordinator/http/api_router.h"

#include "coordinator/http/api_exchange.h"
#include "util/check.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

// A dot, escaped or not, is a dot (a route means no other); no other
// escape or metacharacter is taken.
std::string Literal(const std::string& text, const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '.') {
      out += '.';
      ++i;
      continue;
    }
    SAGAD_CHECK(std::string("\\^$*+?()[]{}|").find(text[i]) == std::string::npos)
        << "route pattern " << pattern << ": '" << text << "' is not in the router's dialect";
    out += text[i];
  }
  return out;
}

}  // namespace

std::vector<ApiRouter::Segment> ApiRouter::Compile(const std::string& pattern) {
  SAGAD_CHECK(!pattern.empty() && pattern[0] == '/') << "route pattern " << pattern;
  std::vector<Segment> out;
  size_t at = 1;
  while (true) {
    // The two "any" groups hold a slash of their own: taken whole.
    size_t slash = pattern.find('/', at);
    for (const char* any : {"([^/]+)", "([^/]*)"})
      if (pattern.compare(at, 7, any) == 0) slash = pattern.find('/', at + 7);
    const std::string text =
        pattern.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
    Segment s;
    if (text == "([^/]+)") {
      s.kind = Segment::kAny;
    } else if (text == "([^/]*)") {
      s.kind = Segment::kAnyOrEmpty;
    } else if (text.size() >= 2 && text.front() == '(' && text.back() == ')') {
      s.kind = Segment::kOneOf;
      const std::string inner = text.substr(1, text.size() - 2);
      size_t from = 0;
      while (true) {
        const size_t bar = inner.find('|', from);
        s.options.push_back(
            Literal(inner.substr(from, bar == std::string::npos ? bar : bar - from), pattern));
        if (bar == std::string::npos) break;
        from = bar + 1;
      }
    } else {
      s.options.push_back(Literal(text, pattern));
    }
    out.push_back(std::move(s));
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  return out;
}

bool ApiRouter::Match(const std::vector<Segment>& pattern, const std::string& path,
                      std::vector<std::string>* groups) {
  if (path.empty() || path[0] != '/') return false;
  size_t at = 1;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const size_t slash = path.find('/', at);
    const bool last = i + 1 == pattern.size();
    if (last != (slash == std::string::npos)) return false;  // more or fewer segments
    const size_t len = (slash == std::string::npos ? path.size() : slash) - at;
    const Segment& s = pattern[i];
    switch (s.kind) {
      case Segment::kLiteral:
        if (path.compare(at, len, s.options[0]) != 0) return false;
        break;
      case Segment::kAny:
        if (len == 0) return false;
        groups->push_back(path.substr(at, len));
        break;
      case Segment::kAnyOrEmpty:
        groups->push_back(path.substr(at, len));
        break;
      case Segment::kOneOf: {
        bool found = false;
        for (const std::string& o : s.options) found = found || path.compare(at, len, o) == 0;
        if (!found) return false;
        groups->push_back(path.substr(at, len));
        break;
      }
    }
    at = slash + 1;
  }
  return true;
}

void ApiRouter::Route(const std::string& method, std::vector<std::string> openapi_paths,
                      const std::string& pattern, Handler handler) {
  for (auto& p : openapi_paths) routes_.push_back(method + " " + p);
  Get(method, pattern, std::move(handler));
  table_.back().openapi_path = openapi_paths.empty() ? pattern : openapi_paths[0];
}

void ApiRouter::Get(const std::string& method, const std::string& pattern, Handler handler) {
  table_.push_back({method, Compile(pattern), std::move(handler), "", {}});
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
  std::vector<std::string> groups;  // [0], the whole path, is put in on a match only
  for (const Entry& r : table_) {
    groups.clear();
    if (!Match(r.pattern, req.path, &groups)) continue;
    if (r.method != method) {
      allowed.insert(r.method);
      if (r.method == "GET") allowed.insert("HEAD");
      continue;
    }
    if (std::string why = UnknownParams(req, r); !why.empty()) return Problem(req, res, 400, why);
    groups.insert(groups.begin(), req.path);
    req.matches = std::move(groups);
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
