#include "coordinator/http_api.h"

#include <atomic>
#include <limits>
#include <regex>
#include <set>

#include "adapters/sha256.h"
#include "coordinator/http/api_exchange.h"
#include "coordinator/http/http_server.h"
#include "sagas/json_limits.h"
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
        server_(ServerOptions(config),
                [this](HttpRequest& req, HttpResponse& res) { Dispatch(req, res); },
                [](const HttpRequest& req, HttpResponse& res, int status, const std::string& detail) {
                  if (status == 503 || status == 408) res.set_header("Retry-After", "1");
                  Problem(req, res, status, detail);
                }) {
    Routes();
  }

  static HttpServerOptions ServerOptions(const Config& config) {
    HttpServerOptions o;
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
    return server_.Bind(host, port);
  }
  void Serve() { server_.Serve(); }
  void Stop() {
    server_.Stop();
    // Long polls still waiting hold their connections: drop them now, while
    // the server they belong to exists.
    engine_.CancelWaits();
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
    for (const RouteEntry& r : table_) {
      std::smatch m;
      if (!std::regex_match(req.path, m, r.pattern)) continue;
      if (r.method != req.method) {
        allowed.insert(r.method);
        continue;
      }
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
  // Returns the caller's name, or empty (with a 401/403 response) if the
  // request may not proceed.
  std::string Authorize(const HttpRequest& req, HttpResponse& res, Role need,
                        const Token** who = nullptr) {
    if (config_.tokens.empty()) return "local";
    std::string h = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (h.compare(0, prefix.size(), prefix) != 0) {
      res.set_header("WWW-Authenticate", "Bearer");
      Problem(req, res, 401, "missing bearer token");
      return "";
    }
    std::string tok = h.substr(prefix.size());
    std::string tok_sha256;  // computed once, if some token is configured by its hash
    for (const Token& t : config_.tokens) {
      if (t.token.empty()) {
        if (tok_sha256.empty()) tok_sha256 = Sha256Hex(tok);
        if (!ConstantTimeEquals(t.token_sha256, tok_sha256)) continue;
      } else if (!ConstantTimeEquals(t.token, tok)) {
        continue;
      }
      if (static_cast<int>(t.role) < static_cast<int>(need)) {
        Problem(req, res, 403, "token '" + t.name + "' lacks the role for this action");
        return "";
      }
      if (who) *who = &t;
      return t.name;
    }
    res.set_header("WWW-Authenticate", "Bearer error=\"invalid_token\"");
    Problem(req, res, 401, "unknown bearer token");
    return "";
  }

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
  };

  // Registers a handler and records the OpenAPI paths it serves, so the
  // document and the server can be checked against each other.
  void Route(const std::string& method, std::vector<std::string> openapi_paths,
             const std::string& pattern, RouteHandler handler) {
    for (auto& p : openapi_paths) routes_.push_back(method + " " + p);
    Get(method, pattern, std::move(handler));
  }
  // A route the OpenAPI document does not describe (the console's files).
  void Get(const std::string& method, const std::string& pattern, RouteHandler handler) {
    table_.push_back({method, std::regex(pattern), std::move(handler)});
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
      if (Authorize(req, res, Role::kViewer).empty()) return;
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
      if (Authorize(req, res, Role::kViewer).empty()) return;
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
      if (Authorize(req, res, Role::kViewer).empty()) return;
      double wait;
      if (!WaitParam(req, res, &wait)) return;
      std::string id = req.matches[1];
      if (wait > 0) {  // a long poll: no thread waits for it
        auto complete = res.Defer();
        engine_.WaitSettledAsync(id, std::chrono::milliseconds(int64_t(wait * 1000)),
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
      if (Authorize(req, res, Role::kViewer).empty()) return;
      auto evs = engine_.GetEvents(req.matches[1]);
      if (!evs.ok()) return ProblemFromStatus(req, res, evs.status());
      nlohmann::json out = nlohmann::json::array();
      for (const auto& e : *evs) out.push_back(e.ToJson());
      Json(res, 200, {{"instance_id", std::string(req.matches[1])}, {"events", out}});
    });

    Route("GET", {"/v1/instances/{id}/bundle"}, R"(/v1/instances/([^/]+)/bundle)", [this](const HttpRequest& req, HttpResponse& res) {
      if (Authorize(req, res, Role::kViewer).empty()) return;
      auto b = engine_.Bundle(req.matches[1]);
      if (!b.ok()) return ProblemFromStatus(req, res, b.status());
      Json(res, 200, *b);
    });

    Route("GET", {"/v1/whoami"}, "/v1/whoami", [this](const HttpRequest& req, HttpResponse& res) {
      const Token* t = nullptr;
      if (Authorize(req, res, Role::kViewer, &t).empty()) return;
      static const char* kRoleNames[] = {"viewer", "submitter", "operator", "admin"};
      Json(res, 200, {{"name", t ? t->name : "local"},
                      {"role", t ? kRoleNames[static_cast<int>(t->role)] : "admin"}});
    });

    Route("GET", {"/v1/counts"}, "/v1/counts", [this](const HttpRequest& req, HttpResponse& res) {
      if (Authorize(req, res, Role::kViewer).empty()) return;
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
      if (Authorize(req, res, Role::kViewer).empty()) return;
      auto a = engine_.Approvals();
      if (!a.ok()) return ProblemFromStatus(req, res, a.status());
      Json(res, 200, {{"approvals", *a}});
    });

    Route("POST", StepActionPaths(), R"(/v1/instances/([^/]+)/steps/([^/]+)/(approve|reject|resolve|retry|skip))",
                 [this](const HttpRequest& req, HttpResponse& res) { StepAction(req, res); });

    Route("POST", {"/v1/instances/{id}/cancel", "/v1/instances/{id}/compensate"}, R"(/v1/instances/([^/]+)/(cancel|compensate))", [this](const HttpRequest& req, HttpResponse& res) {
      std::string who = Authorize(req, res, Role::kOperator);
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
    if (Authorize(req, res, Role::kSubmitter).empty()) return;
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
      engine_.WaitSettledAsync(sub->instance_id, std::chrono::milliseconds(int64_t(wait * 1000)),
                               [&req, &res, complete, answer](StatusOr<nlohmann::json> j) {
                                 answer(req, res, j);
                                 complete();
                               });
      return;
    }
    answer(req, res, engine_.GetInstance(sub->instance_id));
  }

  void StepAction(const HttpRequest& req, HttpResponse& res) {
    std::string who = Authorize(req, res, Role::kOperator);
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
