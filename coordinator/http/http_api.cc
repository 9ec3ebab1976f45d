#include "coordinator/http/http_api.h"

#include <atomic>
#include <limits>
#include <regex>
#include <set>

#include "adapters/sha256.h"
#include "coordinator/http/api_auth.h"
#include "coordinator/http/api_exchange.h"
#include "coordinator/http/http_server.h"
#include "util/json_limits.h"
#include "openapi_json.h"
#include "ui_files.h"  // kUiFiles, from ui/

namespace sagad {
namespace {

constexpr size_t kMaxBodyBytes = 1 << 20;

}  // namespace

class ApiServer::Impl {
 public:
  Impl(Engine& engine, const Config& config)
      : engine_(engine),
        config_(config),
        auth_(config.tokens),
        server_(ServerOptions(config, auth_),
                [this](HttpRequest& req, HttpResponse& res) { Dispatch(req, res); },
                [](const HttpRequest& req, HttpResponse& res, int status, const std::string& detail) {
                  if (status == 500) return ProblemFromStatus(req, res, Internal(detail));
                  if (status == 503 || status == 408) res.set_header("Retry-After", "1");
                  Problem(req, res, status, detail);
                }) {
    Routes();
  }

  static HttpServerOptions ServerOptions(const Config& config, const ApiAuth& auth) {
    HttpServerOptions o;
    // Before a body is invited (Expect: 100-continue), the caller must be known.
    o.head_check = [&auth](const HttpRequest& req, HttpResponse& res) {
      return auth.Authenticated(req, res);
    };
    o.body_limit = kMaxBodyBytes;
    o.tls_cert_file = config.tls_cert_file;
    o.tls_key_file = config.tls_key_file;
    o.max_connections = config.max_connections;
    o.max_connections_per_client = config.max_connections_per_client;
    o.request_timeout = std::chrono::milliseconds(config.request_timeout_ms);
    o.idle_timeout = std::chrono::milliseconds(config.idle_timeout_ms);
    o.handler_threads = config.api_threads;
    return o;
  }

  StatusOr<int> Bind(const std::string& host, int port) {
    SAGAD_RETURN_IF_ERROR(server_.Init());
    auto bound = server_.Bind(host, port);
    // Whatever the name resolved to: without tokens, only loopback.
    if (bound.ok() && config_.tokens.empty() && !server_.BoundToLoopback())
      return InvalidArgument("no tokens are configured, so sagad only listens on loopback; " +
                             host + " is not a loopback address");
    return bound;
  }
  void Serve() { server_.Serve(); }
  // Drains: no new connection or request; the long polls still waiting are
  // answered 503 (Retry-After) and every answer owed is written (up to 2 s)
  // before the server stops.
  void Stop() {
    server_.StopAccepting();
    engine_.FinishWaits(Unavailable("sagad is shutting down; ask again in a moment"));
    server_.WaitIdle(std::chrono::seconds(2));
    server_.Stop();
    engine_.CancelWaits();  // whatever raced in after the drain
  }
  void SetReady(bool r) { ready_ = r; }

 private:
  // Checks, routes and serves one request (on a handler thread).
  void Dispatch(HttpRequest& req, HttpResponse& res) {
    std::string why = RefuseBeforeRouting(req);
    if (!why.empty()) {
      res.set_header("Connection", "close");
      return Problem(req, res, 400, why);
    }
    std::set<std::string> allowed;
    // HEAD is GET without the body (the server drops it).
    const std::string method = req.method == "HEAD" ? "GET" : req.method;
    for (const RouteEntry& r : table_) {
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

 private:
  static std::vector<std::string> StepActionPaths() {
    std::vector<std::string> out;
    for (const char* a : {"approve", "reject", "resolve", "retry", "skip"})
      out.push_back(std::string("/v1/instances/{id}/steps/{step}/") + a);
    return out;
  }

  using RouteHandler = std::function<void(HttpRequest&, HttpResponse&)>;
  struct RouteEntry {
    std::string method;
    std::regex pattern;
    RouteHandler handler;
    std::string openapi_path;     // empty for the console's files
    std::set<std::string> params;  // the query parameters it takes
  };

  // Empty when every query parameter is one the route takes; else the
  // refusal naming them (a misspelt ?limt=5 must not be silently ignored).
  static std::string UnknownParams(const HttpRequest& req, const RouteEntry& r) {
    if (r.openapi_path.empty()) return "";
    std::string unknown;
    for (const auto& [k, v] : req.params)
      if (!r.params.count(k) && unknown.find("'" + k + "'") == std::string::npos)
        unknown += (unknown.empty() ? "'" : ", '") + SanitizeUtf8(k) + "'";
    if (unknown.empty()) return "";
    std::string takes;
    for (const auto& p : r.params) takes += (takes.empty() ? "" : ", ") + p;
    return "unknown query parameter " + unknown + " (" + r.method + " " + r.openapi_path +
           (takes.empty() ? " takes none)" : " takes: " + takes + ")");
  }

  // The query parameters `method openapi_path` takes (none unless said).
  void TakesParams(const std::string& method, const std::string& openapi_path,
                   std::set<std::string> params) {
    for (RouteEntry& r : table_)
      if (r.method == method && r.openapi_path == openapi_path) r.params = params;
  }

  // Registers a handler and records the OpenAPI paths it serves, so the
  // document and the server can be checked against each other.
  void Route(const std::string& method, std::vector<std::string> openapi_paths,
             const std::string& pattern, RouteHandler handler) {
    for (auto& p : openapi_paths) routes_.push_back(method + " " + p);
    Get(method, pattern, std::move(handler));
    table_.back().openapi_path = openapi_paths.empty() ? pattern : openapi_paths[0];
  }
  // A route the OpenAPI document does not describe (the console's files).
  void Get(const std::string& method, const std::string& pattern, RouteHandler handler) {
    table_.push_back({method, std::regex(pattern), std::move(handler), "", {}});
  }

  void Routes() {
    Route("GET", {"/v1/openapi.json"}, "/v1/openapi.json",
          [](const HttpRequest&, HttpResponse& res) {
            res.set_content(kOpenApiJson, "application/json");
          });
    Route("GET", {"/healthz"}, "/healthz", [](const HttpRequest&, HttpResponse& res) {
      Json(res, 200, {{"status", "ok"}});
    });
    Route("GET", {"/readyz"}, "/readyz", [this](const HttpRequest& req, HttpResponse& res) {
      if (!ready_) return Problem(req, res, 503, "recovery in progress");
      Status writable = engine_.CheckWritable();
      if (!writable.ok()) {
        res.set_header("Retry-After", "1");
        return Problem(req, res, 503, "the store cannot take writes: " + writable.message());
      }
      Json(res, 200, {{"status", "ready"}});
    });
    Route("GET", {"/metrics"}, "/metrics", [this](const HttpRequest&, HttpResponse& res) {
      std::string out =
          "# HELP sagad_up 1 while sagad serves.\n# TYPE sagad_up gauge\nsagad_up 1\n"
          "# HELP sagad_ready 1 once recovery has been scheduled.\n# TYPE sagad_ready gauge\n"
          "sagad_ready " + std::string(ready_ ? "1" : "0") + "\n" +
          "# HELP sagad_http_connections_open API connections open now.\n"
          "# TYPE sagad_http_connections_open gauge\nsagad_http_connections_open " +
          std::to_string(server_.open_connections()) + "\n" + engine_.MetricsText();
      res.set_content(out, "text/plain; version=0.0.4");
    });

    Route("GET", {"/v1/sagas"}, "/v1/sagas", [this](const HttpRequest& req, HttpResponse& res) {
      if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
      nlohmann::json out = nlohmann::json::array();
      for (const auto& d : engine_.Definitions()) {
        nlohmann::json j = d->ToJson();
        j["required_input"] = d->RequiredInputFields();
        out.push_back(j);
      }
      Json(res, 200, {{"sagas", out}});
    });

    Route("POST", {"/v1/sagas/{saga}/instances"}, R"(/v1/sagas/([^/]+)/instances)",
                 [this](const HttpRequest& req, HttpResponse& res) { Submit(req, res); });

    Route("GET", {"/v1/instances"}, "/v1/instances", [this](const HttpRequest& req, HttpResponse& res) {
      if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
      std::string status = req.get_param_value("status");
      static const std::set<std::string> kStatuses = {
          "", "RUNNING", "AWAITING_APPROVAL", "COMPLETED", "COMPENSATING", "COMPENSATED",
          "NEEDS_REVIEW"};
      if (!kStatuses.count(status)) {
        Problem(req, res, 400, "unknown status '" + status + "'");
        return;
      }
      size_t limit = 50;
      if (req.has_param("limit")) {
        std::string v = req.get_param_value("limit");
        char* end = nullptr;
        long l = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || l < 1 || l > 500) {
          Problem(req, res, 400, "limit must be an integer from 1 to 500");
          return;
        }
        limit = static_cast<size_t>(l);
      }
      std::string waiting = req.get_param_value("waiting");
      if (!waiting.empty() && waiting != "retry" && waiting != "approval" && waiting != "review") {
        Problem(req, res, 400, "waiting must be retry, approval or review");
        return;
      }
      std::string cursor = req.get_param_value("cursor");
      if (!ValidCursor(cursor)) {
        Problem(req, res, 400, "cursor must be a next_cursor value from an earlier page");
        return;
      }
      auto page = engine_.List({status, req.get_param_value("saga"), waiting}, limit, cursor);
      if (!page.ok()) return ProblemFromStatus(req, res, page.status());
      nlohmann::json out = {{"instances", page->instances}};
      out["next_cursor"] = page->next_cursor.empty() ? nlohmann::json() : nlohmann::json(page->next_cursor);
      Json(res, 200, out);
    });

    Route("GET", {"/v1/instances/{id}"}, R"(/v1/instances/([^/]+))", [this](const HttpRequest& req, HttpResponse& res) {
      if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
      double wait;
      if (!WaitParam(req, res, &wait)) return;
      std::string id = req.matches[1];
      if (wait > 0) {  // a long poll: no thread waits for it
        auto complete = res.Defer();
        // Registered before the wait starts: once it answers, res is not ours.
        auto drop = std::make_shared<std::function<bool()>>();
        res.OnAbandon([drop] { (*drop)(); });
        *drop = engine_.WaitSettledAsync(
            id, std::chrono::milliseconds(int64_t(wait * 1000)),
            [&req, &res, complete](StatusOr<nlohmann::json> j) {
              if (!j.ok()) ProblemFromStatus(req, res, j.status());
              else Json(res, 200, *j);
              complete();
            });
        return;
      }
      auto j = engine_.GetInstance(id);
      if (!j.ok()) return ProblemFromStatus(req, res, j.status());
      Json(res, 200, *j);
    });

    Route("GET", {"/v1/instances/{id}/events"}, R"(/v1/instances/([^/]+)/events)", [this](const HttpRequest& req, HttpResponse& res) {
      if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
      auto evs = engine_.GetEvents(req.matches[1]);
      if (!evs.ok()) return ProblemFromStatus(req, res, evs.status());
      nlohmann::json out = nlohmann::json::array();
      for (const auto& e : *evs) out.push_back(e.ToJson());
      Json(res, 200, {{"instance_id", std::string(req.matches[1])}, {"events", out}});
    });

    Route("GET", {"/v1/instances/{id}/bundle"}, R"(/v1/instances/([^/]+)/bundle)", [this](const HttpRequest& req, HttpResponse& res) {
      if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
      auto b = engine_.Bundle(req.matches[1]);
      if (!b.ok()) return ProblemFromStatus(req, res, b.status());
      Json(res, 200, *b);
    });

    Route("GET", {"/v1/whoami"}, "/v1/whoami", [this](const HttpRequest& req, HttpResponse& res) {
      const Token* t = nullptr;
      if (auth_.Authorize(req, res, Role::kViewer, &t).empty()) return;
      Json(res, 200, {{"name", t ? t->name : "local"},
                      {"role", t ? RoleName(t->role) : "admin"}});
    });

    Route("GET", {"/v1/counts"}, "/v1/counts", [this](const HttpRequest& req, HttpResponse& res) {
      if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
      auto c = engine_.Counts();
      if (!c.ok()) return ProblemFromStatus(req, res, c.status());
      Json(res, 200, *c);
    });

    // The console: static files compiled in (ui/). They hold no data; every
    // datum comes from the API with the operator's bearer token.
    Get("GET", "/ui", [](const HttpRequest&, HttpResponse& res) {
      res.status = 308;
      res.set_header("Location", "/ui/");
    });
    Get("GET", R"(/ui/(|index\.html|app\.js|style\.css))",
                [](const HttpRequest& req, HttpResponse& res) {
      std::string name = req.matches[1];
      const UiFile* f = FindUiFile(name.empty() ? "index.html" : name);
      if (!f) return Problem(req, res, 404, "no such file");
      res.set_header("Content-Security-Policy",
                     "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                     "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Referrer-Policy", "no-referrer");
      res.set_header("Cache-Control", "no-cache");
      res.set_content(f->data, f->size, f->content_type);
    });

    Route("GET", {"/v1/approvals"}, "/v1/approvals", [this](const HttpRequest& req, HttpResponse& res) {
      if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
      auto a = engine_.Approvals();
      if (!a.ok()) return ProblemFromStatus(req, res, a.status());
      Json(res, 200, {{"approvals", *a}});
    });

    Route("POST", StepActionPaths(), R"(/v1/instances/([^/]+)/steps/([^/]+)/(approve|reject|resolve|retry|skip))",
                 [this](const HttpRequest& req, HttpResponse& res) { StepAction(req, res); });

    TakesParams("GET", "/v1/instances", {"status", "saga", "waiting", "limit", "cursor"});
    TakesParams("GET", "/v1/instances/{id}", {"wait"});
    TakesParams("POST", "/v1/sagas/{saga}/instances", {"wait", "version"});

    Route("POST", {"/v1/instances/{id}/cancel", "/v1/instances/{id}/compensate"}, R"(/v1/instances/([^/]+)/(cancel|compensate))", [this](const HttpRequest& req, HttpResponse& res) {
      std::string who = auth_.Authorize(req, res, Role::kOperator);
      if (who.empty()) return;
      nlohmann::json body;
      std::string reason;
      if (!BodyObject(req, res, &body, true) || !OptionalString(req, res, body, "reason", &reason)) return;
      std::string id = req.matches[1];
      Status s = std::string(req.matches[2]) == "cancel" ? engine_.Cancel(id, who, reason)
                                                         : engine_.ForceCompensate(id, who, reason);
      if (!s.ok()) return ProblemFromStatus(req, res, s);
      auto j = engine_.GetInstance(id);
      if (!j.ok()) return ProblemFromStatus(req, res, j.status());
      Json(res, 200, *j);
    });
  }

  // "path message; ..." for the first few errors (all are in "errors").
  static std::string ErrorList(const std::vector<SchemaError>& errors) {
    std::string out;
    for (size_t i = 0; i < errors.size() && i < 8; ++i)
      out += (i ? "; " : "") + (errors[i].path.empty() ? "input" : errors[i].path) + " " +
             errors[i].message;
    if (errors.size() > 8) out += "; ...";
    return out;
  }

  void Submit(const HttpRequest& req, HttpResponse& res) {
    if (auth_.Authorize(req, res, Role::kSubmitter).empty()) return;
    std::string saga = req.matches[1];
    double wait;
    if (!WaitParam(req, res, &wait)) return;
    nlohmann::json body;
    if (!BodyObject(req, res, &body, false)) return;
    if (!body.contains("input") || !body["input"].is_object()) {
      Problem(req, res, 400, "body must be {\"input\": {...}} with an object as input");
      return;
    }
    std::string key = req.get_header_value("Idempotency-Key");
    if (key.size() > 255) {
      Problem(req, res, 400, "Idempotency-Key is longer than 255 characters");
      return;
    }
    std::string hash = Sha256Hex(saga + "\n" + CanonicalJson(body));
    int version = 0;
    if (req.has_param("version") || body.contains("version")) {
      std::string v = req.has_param("version") ? req.get_param_value("version")
                      : body["version"].is_number_unsigned() ? body["version"].dump()
                                                             : std::string("x");
      if (!ParseVersion(v, &version)) {
        Problem(req, res, 400, "version must be an integer from 1 to 2147483647");
        return;
      }
    }
    if (SagaDefinitionPtr def = engine_.Definition(saga, version)) {
      std::vector<SchemaError> errors = def->InputErrors(body["input"]);
      if (!errors.empty()) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto& e : errors) list.push_back({{"path", e.path}, {"message", e.message}});
        // 422 for an input_schema; a saga with only required fields
        // answers 400, as it always did.
        Problem(req, res, def->input_schema.is_null() ? 400 : 422,
                "input does not match saga '" + saga + "': " + ErrorList(errors),
                {{"errors", list}});
        return;
      }
    }
    auto sub = engine_.Submit(saga, version, body["input"], key, hash,
                              TraceFromHeaders(req.get_header_value("traceparent"),
                                               req.get_header_value("tracestate")));
    if (!sub.ok()) return ProblemFromStatus(req, res, sub.status());
    std::string location = "/v1/instances/" + sub->instance_id;
    res.set_header("Location", location);
    if (sub->replayed) {
      res.set_header("Idempotent-Replayed", "true");
      if (sub->stored_status != 0) return Json(res, sub->stored_status, sub->stored_response);
      // The first request never got its answer (sagad died before replying):
      // answer this one as the first would have been, waiting if asked to.
    }
    // The key must never stay "in progress": every path out finishes it.
    auto answer = [this, key, wait](const HttpRequest& req, HttpResponse& res,
                                    const StatusOr<nlohmann::json>& j) {
      try {
        if (!j.ok()) {
          engine_.FinishSubmission(key, 0, nullptr);
          return ProblemFromStatus(req, res, j.status());
        }
        int status = (wait > 0 && Engine::IsSettled(j->value("status", ""))) ? 200 : 201;
        engine_.FinishSubmission(key, status, *j);
        Json(res, status, *j);
      } catch (const std::exception& e) {
        engine_.FinishSubmission(key, 0, nullptr);
        ProblemFromStatus(req, res, Internal(e.what()));
      }
    };
    if (wait > 0) {  // held until settled or the time is up, without a thread
      auto complete = res.Defer();
      // A client gone before the answer: the instance runs on; a replay of
      // the key gets what this request would have. Registered before the
      // wait starts: once it answers, res is not ours.
      auto drop = std::make_shared<std::function<bool()>>();
      res.OnAbandon([this, drop, key] {
        if ((*drop)()) engine_.FinishSubmission(key, 0, nullptr);  // never answered
      });
      *drop = engine_.WaitSettledAsync(
          sub->instance_id, std::chrono::milliseconds(int64_t(wait * 1000)),
          [&req, &res, complete, answer](StatusOr<nlohmann::json> j) {
            answer(req, res, j);
            complete();
          });
      return;
    }
    answer(req, res, engine_.GetInstance(sub->instance_id));
  }

  void StepAction(const HttpRequest& req, HttpResponse& res) {
    std::string who = auth_.Authorize(req, res, Role::kOperator);
    if (who.empty()) return;
    std::string id = req.matches[1], step = req.matches[2], action = req.matches[3];
    nlohmann::json body;
    if (!BodyObject(req, res, &body, action != "resolve" && action != "skip")) return;
    std::string comment, reason, outcome, ref;
    if (!OptionalString(req, res, body, "comment", &comment) ||
        !OptionalString(req, res, body, "reason", &reason) ||
        !OptionalString(req, res, body, "outcome", &outcome) ||
        !OptionalString(req, res, body, "external_ref", &ref))
      return;
    Status s;
    if (action == "approve") {
      s = engine_.Approve(id, step, who, comment);
    } else if (action == "reject") {
      s = engine_.Reject(id, step, who, reason.empty() ? comment : reason);
    } else if (action == "retry") {
      s = engine_.RetryNow(id, step, who, comment);
    } else if (action == "skip") {
      auto it = body.find("result");
      if (it == body.end() || !it->is_object())
        return Problem(req, res, 400, "'result' (a JSON object) is required to skip a step");
      s = engine_.Skip(id, step, *it, ref, who, comment);
    } else {
      if (outcome.empty()) return Problem(req, res, 400, "'outcome' is required: \"committed\" or \"not_executed\"");
      s = engine_.Resolve(id, step, outcome, ref, who, comment);
    }
    if (!s.ok()) return ProblemFromStatus(req, res, s);
    auto j = engine_.GetInstance(id);
    if (!j.ok()) return ProblemFromStatus(req, res, j.status());
    Json(res, 200, *j);
  }

  Engine& engine_;
  Config config_;
  ApiAuth auth_;
  std::vector<RouteEntry> table_;
  std::atomic<bool> ready_{false};
  HttpServer server_;  // last: its threads call into the members above

 public:
  std::vector<std::string> routes_;
};

ApiServer::ApiServer(Engine& engine, const Config& config) : impl_(new Impl(engine, config)) {}
ApiServer::~ApiServer() = default;
StatusOr<int> ApiServer::Bind(const std::string& host, int port) { return impl_->Bind(host, port); }
void ApiServer::Serve() { impl_->Serve(); }
void ApiServer::Stop() { impl_->Stop(); }
void ApiServer::SetReady(bool r) { impl_->SetReady(r); }
std::vector<std::string> ApiServer::RegisteredRoutes() const { return impl_->routes_; }

}  // namespace sagad
