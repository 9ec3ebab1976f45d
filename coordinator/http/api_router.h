// ApiRouter: the API's route table. A route is a method, a path pattern
// and a handler; the pattern is a path whose segments are each a literal
// ("instances", "openapi.json": a dot is a dot, escaped or not), `([^/]+)` (any non-empty segment),
// `([^/]*)` (any segment) or `(a|b|c)` (one of these literals, possibly
// empty): the regular expressions the routes were first written as, matched
// segment by segment without a regex engine (a request used to run
// std::regex_match over every route before its own). Each group becomes
// one of req.matches (req.matches[0] is the whole path); a pattern outside
// that dialect is a programming error, refused when it is added. The
// OpenAPI paths it serves and the query parameters it takes are recorded
// with it, so that the document and the server can be checked against each
// other and an unknown parameter (a misspelt ?limt=5) is refused, never
// silently ignored.
// Thread-safety: routes are added before serving; Dispatch may then run on
// many threads at once.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/http/http_message.h"

namespace sagad {

class ApiRouter {
 public:
  using Handler = std::function<void(HttpRequest&, HttpResponse&)>;

  // A route the OpenAPI document describes, under `openapi_paths`.
  void Route(const std::string& method, std::vector<std::string> openapi_paths,
             const std::string& pattern, Handler handler);
  // A route the OpenAPI document does not describe (the console's files).
  void Get(const std::string& method, const std::string& pattern, Handler handler);
  // The query parameters `method openapi_path` takes (none unless said);
  // "prefix.*" takes every "prefix.NAME".
  void TakesParams(const std::string& method, const std::string& openapi_path,
                   std::set<std::string> params);

  // Checks, routes and serves one request: 400 for a request refused before
  // routing or naming an unknown parameter, 405 with Allow for a known path
  // and another method (HEAD is GET without the body), 404 otherwise.
  void Dispatch(HttpRequest& req, HttpResponse& res) const;

  // "METHOD /openapi/path" for every route served.
  const std::vector<std::string>& routes() const { return routes_; }

 private:
  // One segment of a pattern: a literal, any segment, or one of `options`.
  struct Segment {
    enum Kind { kLiteral, kAny, kAnyOrEmpty, kOneOf } kind = kLiteral;
    std::vector<std::string> options;  // kLiteral: the one; kOneOf: each
  };
  static std::vector<Segment> Compile(const std::string& pattern);
  // Whether `path` matches `pattern`; its groups appended to *groups.
  static bool Match(const std::vector<Segment>& pattern, const std::string& path,
                    std::vector<std::string>* groups);

  struct Entry {
    std::string method;
    std::vector<Segment> pattern;
    Handler handler;
    std::string openapi_path;      // empty for the console's files
    std::set<std::string> params;  // the query parameters it takes
  };
  static std::string UnknownParams(const HttpRequest& req, const Entry& r);

  std::vector<Entry> table_;
  std::vector<std::string> routes_;
};

}  // namespace sagad
