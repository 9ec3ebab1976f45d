// The API's lifecycle, route table and small handlers (http_api_impl.h).
#include "coordinator/http/http_api.h"

#include <strings.h>

#include "coordinator/http/api_exchange.h"
#include "coordinator/http/http_api_impl.h"
#include "openapi_json.h"
#include "ui_files.h"  // kUiFiles, from ui/
#include "util/json_limits.h"
#include "util/thread_role.h"

namespace sagad {
namespace {

constexpr size_t kMaxBodyBytes = 1 << 20;

std::vector<std::string> StepActionPaths() {
  std::vector<std::string> out;
  for (const char* a : {"approve", "reject", "resolve", "retry", "skip"})
    out.push_back(std::string("/v1/instances/{id}/steps/{step}/") + a);
  return out;
}

}  // namespace

ApiServer::Impl::Impl(Engine& engine, const ApiOptions& options)
    : engine_(engine),
      options_(options),
      auth_(options.tokens),
      readers_(options.history_readers, kMaxQueuedHistoryReads),
      server_(
          [this, &options] {
            HttpServerOptions o = ServerOptions(options, auth_);
            o.on_loop = [this](const HttpRequest& req, HttpResponse& res) {
              return OnLoop(req, res);
            };
            // Handlers may wait for the store: the engine's housekeeping.
            o.run_handler = [this](std::function<void()> task) {
              engine_.PostHouse(std::move(task));
            };
            return o;
          }(),
          [this](HttpRequest& req, HttpResponse& res) { Dispatch(req, res); },
          [](const HttpRequest& req, HttpResponse& res, int status, const std::string& detail) {
            if (status == 500) return ProblemFromStatus(req, res, Internal(detail));
            if (status == 503 || status == 408) res.set_header("Retry-After", "1");
            Problem(req, res, status, detail);
          }) {
  Routes();
}

// /healthz on the event loop: it takes no lock of the engine or the store
// and needs no handler thread, so it answers while every handler is busy
// (a stalled store holds the ones that commit). So does /readyz when the
// watchdog sees a stall. Any other form of them (a query, another method, a
// readiness that must ask the store) goes to the router.
bool ApiServer::Impl::OnLoop(const HttpRequest& req, HttpResponse& res) {
  if ((req.method != "GET" && req.method != "HEAD") || !req.params.empty() || !req.body.empty())
    return false;
  if (req.path == "/healthz") {
    Json(res, 200, {{"status", "ok"}});
    return true;
  }
  return req.path == "/readyz" &&
         ((ready_ && StalledAnswer(req, res)) || ProbedReadiness(req, res));
}

namespace {
constexpr int kProbeEveryMs = 250;
// A probe older than this says nothing: the store has not answered since.
constexpr int kProbeStaleMs = 3000;
}  // namespace

void ApiServer::Impl::Serve() {
  StartProbe();
  server_.Serve();
}

ApiServer::Impl::~Impl() {
  readers_.Stop();  // before the server: a read answers through it
  MutexLock l(probe_->mu);
  probe_->stop = true;
}

void ApiServer::Impl::StartProbe() {
  // It may wait for the store: that is its job, on a thread that may.
  engine_.Every(kProbeEveryMs, [probe = probe_, &engine = engine_] {
    {
      MutexLock l(probe->mu);
      if (probe->stop) return false;
    }
    Status s = engine.CheckWritable();  // may take as long as the store does
    MutexLock l(probe->mu);
    probe->probing = true;  // from the first answer on, /readyz answers from it
    probe->probed = s;
    probe->at = std::chrono::steady_clock::now();
    return !probe->stop;
  });
}

bool ApiServer::Impl::ProbedReadiness(const HttpRequest& req, HttpResponse& res) {
  Status s;
  int64_t age_ms = 0;
  {
    MutexLock l(probe_->mu);
    if (!probe_->probing) return false;  // no answer yet: Readyz asks the store itself
    s = probe_->probed;
    age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::steady_clock::now() - probe_->at)
                 .count();
  }
  AnswerReadiness(req, res, [&] {
    return age_ms > kProbeStaleMs
               ? Unavailable("it has not answered for " + std::to_string(age_ms) + " ms")
               : s;
  });
  return true;
}

void ApiServer::Impl::AnswerReadiness(const HttpRequest& req, HttpResponse& res,
                                      const std::function<Status()>& writable) {
  if (!ready_) return Problem(req, res, 503, "recovery in progress");
  if (StalledAnswer(req, res)) return;
  Status s = writable();
  if (s.ok()) return Json(res, 200, {{"status", "ready"}});
  res.set_header("Retry-After", "1");
  Problem(req, res, 503, "the store cannot take writes: " + s.message());
}

int64_t ApiServer::Impl::StalledMs() const {
  const int64_t ms = engine_.WritesStalled().count();
  return ms >= options_.watchdog_ms ? ms : 0;
}

bool ApiServer::Impl::StalledAnswer(const HttpRequest& req, HttpResponse& res) {
  const int64_t stalled = StalledMs();
  if (stalled == 0) return false;
  res.set_header("Retry-After", "1");
  Problem(req, res, 503,
          "the store is stalled: writes have been queued for " + std::to_string(stalled) +
              " ms with none finished (watchdog_ms " + std::to_string(options_.watchdog_ms) + ")");
  return true;
}

HttpServerOptions ApiServer::Impl::ServerOptions(const ApiOptions& options, const ApiAuth& auth) {
  HttpServerOptions o;
  // Before a body is invited (Expect: 100-continue), the caller must be
  // known and may reach sagad (the Host/Origin rule).
  o.head_check = [&auth, options](const HttpRequest& req, HttpResponse& res) {
    if (std::string why = ForeignRequest(req, options); !why.empty()) {
      Problem(req, res, 403, why);
      return false;
    }
    return auth.Authenticated(req, res);
  };
  o.body_limit = kMaxBodyBytes;
  o.tls_cert_file = options.tls_cert_file;
  o.tls_key_file = options.tls_key_file;
  o.max_connections = options.max_connections;
  o.max_connections_per_client = options.max_connections_per_client;
  o.request_timeout = std::chrono::milliseconds(options.request_timeout_ms);
  o.idle_timeout = std::chrono::milliseconds(options.idle_timeout_ms);
  return o;
}

StatusOr<int> ApiServer::Impl::Bind(const std::string& host, int port) {
  SAGAD_RETURN_IF_ERROR(server_.Init());
  auto bound = server_.Bind(host, port);
  // Whatever the name resolved to: without tokens, only loopback.
  if (bound.ok() && options_.tokens.empty() && !server_.BoundToLoopback())
    return InvalidArgument("no tokens are configured, so sagad only listens on loopback; " + host +
                           " is not a loopback address");
  return bound;
}

void ApiServer::Impl::Stop() {
  server_.StopAccepting();
  engine_.FinishWaits(Unavailable("sagad is shutting down; ask again in a moment"));
  server_.WaitIdle(std::chrono::seconds(2));
  readers_.Stop();  // the reads still queued are answered first
  server_.Stop();
  engine_.CancelWaits();  // whatever raced in after the drain
}

void ApiServer::Impl::Exchange(HttpRequest& req, HttpResponse& res,
                               std::shared_ptr<Abandonment> gone, std::function<void()> done) {
  ParseTarget(req.target, &req);
  auto sent = std::make_shared<std::atomic<bool>>(false);
  auto deferred = std::make_shared<bool>(false);  // set on this thread only
  auto complete = [sent, done = std::move(done)] {
    if (!sent->exchange(true)) done();
  };
  res.set_on_complete(complete);
  res.set_on_defer([deferred] { *deferred = true; });
  res.set_abandonment(std::move(gone));
  if (OnLoop(req, res)) return complete();
  try {
    Dispatch(req, res);
  } catch (const std::exception& e) {  // as the server answers a handler that throws
    if (*deferred) throw;
    res.headers.clear();
    ProblemFromStatus(req, res, Internal(std::string("internal error: ") + e.what()));
  }
  if (!*deferred) complete();
}

void ApiServer::Impl::Dispatch(HttpRequest& req, HttpResponse& res) {
  // The probes are excepted (a load balancer's health check names whatever
  // host it likes; they tell nothing and change nothing).
  const bool probe = req.path == "/healthz" || req.path == "/readyz";
  if (std::string why = probe ? "" : ForeignRequest(req, options_); !why.empty())
    return Problem(req, res, 403, why);
  router_.Dispatch(req, res);
}

void ApiServer::Impl::Routes() {
  ProbeRoutes();
  InstanceRoutes();
  RunRoutes();
  ServiceRoutes();
  ConsoleRoutes();
}

void ApiServer::Impl::ProbeRoutes() {
  router_.Route("GET", {"/v1/openapi.json"}, "/v1/openapi.json",
                [](const HttpRequest&, HttpResponse& res) {
                  res.set_content(kOpenApiJson, "application/json");
                });
  router_.Route("GET", {"/healthz"}, "/healthz", [](const HttpRequest&, HttpResponse& res) {
    Json(res, 200, {{"status", "ok"}});
  });
  router_.Route("GET", {"/readyz"}, "/readyz", SAGAD_HANDLER(Readyz));
  router_.Route("GET", {"/metrics"}, "/metrics", SAGAD_HANDLER(Metrics));
  router_.Route("GET", {"/v1/sagas"}, "/v1/sagas", SAGAD_HANDLER(Sagas));
  router_.Route("GET", {"/v1/whoami"}, "/v1/whoami", SAGAD_HANDLER(WhoAmI));
  router_.Route("GET", {"/v1/sagas/{saga}/versions/{version}"},
                R"(/v1/sagas/([^/]+)/versions/([^/]+))", SAGAD_HANDLER(GetDefinition));
  router_.Route("PUT", {"/v1/sagas/{saga}/versions/{version}"},
                R"(/v1/sagas/([^/]+)/versions/([^/]+))", SAGAD_HANDLER(PutDefinition));
}

void ApiServer::Impl::InstanceRoutes() {
  router_.Route("POST", {"/v1/sagas/{saga}/instances"}, R"(/v1/sagas/([^/]+)/instances)",
                SAGAD_HANDLER(Submit));
  router_.Route("GET", {"/v1/instances"}, "/v1/instances", SAGAD_HANDLER(List));
  router_.Route("GET", {"/v1/instances/{id}"}, R"(/v1/instances/([^/]+))", SAGAD_HANDLER(Get));
  router_.Route("GET", {"/v1/instances/{id}/events"}, R"(/v1/instances/([^/]+)/events)",
                SAGAD_HANDLER(Events));
  // The bundle and the receipt: read by whoever may read the instance.
  router_.Route("GET", {"/v1/instances/{id}/bundle", "/v1/instances/{id}/receipt"},
                R"(/v1/instances/([^/]+)/(bundle|receipt))",
                [this](const HttpRequest& req, HttpResponse& res) {
                  const Caller caller = auth_.Identify(req, res, Role::kViewer);
                  if (caller.name.empty()) return;
                  if (Status may = MayRead(caller, req.matches[1]); !may.ok())
                    return ProblemFromStatus(req, res, may);
                  auto b = std::string(req.matches[2]) == "bundle"
                               ? engine_.Bundle(req.matches[1])
                               : engine_.Receipt(req.matches[1]);
                  if (!b.ok()) return ProblemFromStatus(req, res, b.status());
                  Json(res, 200, *b);
                });
  router_.Route("GET", {"/v1/counts"}, "/v1/counts",
                [this](const HttpRequest& req, HttpResponse& res) {
                  if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
                  auto c = engine_.Counts();
                  if (!c.ok()) return ProblemFromStatus(req, res, c.status());
                  Json(res, 200, *c);
                });
  router_.Route("GET", {"/v1/approvals"}, "/v1/approvals",
                [this](const HttpRequest& req, HttpResponse& res) {
                  const Caller caller = auth_.Identify(req, res, Role::kViewer);
                  if (caller.name.empty()) return;
                  auto a = engine_.Approvals();
                  if (!a.ok()) return ProblemFromStatus(req, res, a.status());
                  nlohmann::json out = nlohmann::json::array();
                  for (auto& card : *a)  // a submitter's own only
                    if (caller.Sees(card.value("owner", ""))) out.push_back(std::move(card));
                  Json(res, 200, {{"approvals", out}});
                });
  router_.Route("POST", {"/v1/approvals/actions/approve"}, "/v1/approvals/actions/approve",
                SAGAD_HANDLER(ApproveSeen));
  // Before the single actions: "actions" is not an instance id.
  router_.Route("POST",
                {"/v1/instances/actions/retry", "/v1/instances/actions/cancel",
                 "/v1/instances/actions/approve", "/v1/instances/actions/reject"},
                R"(/v1/instances/actions/(retry|cancel|approve|reject))", SAGAD_HANDLER(Bulk));
  router_.Route("POST", StepActionPaths(),
                R"(/v1/instances/([^/]+)/steps/([^/]+)/(approve|reject|resolve|retry|skip))",
                SAGAD_HANDLER(StepAction));
  router_.Route("POST", {"/v1/instances/{id}/cancel", "/v1/instances/{id}/compensate"},
                R"(/v1/instances/([^/]+)/(cancel|compensate))", SAGAD_HANDLER(CancelOrCompensate));
  router_.TakesParams("GET", "/v1/instances",
                      {"status", "saga", "waiting", "limit", "cursor", "idempotency_key", "owner",
                       "created_after", "created_before", "input.*", "metadata.*"});
  router_.TakesParams("GET", "/v1/instances/{id}", {"wait", "until"});
  router_.TakesParams("POST", "/v1/sagas/{saga}/instances", {"wait", "version"});
}

void ApiServer::Impl::ServiceRoutes() {
  router_.Route("GET", {"/v1/services"}, "/v1/services",
                [this](const HttpRequest& req, HttpResponse& res) {
                  if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
                  Json(res, 200, {{"services", engine_.Services()}});
                });
  router_.Route("POST", {"/v1/services/{name}/pause", "/v1/services/{name}/resume"},
                R"(/v1/services/([^/]+)/(pause|resume))", SAGAD_HANDLER(PauseOrResume));
}

// The console: static files compiled in (ui/). They hold no data; every
// datum comes from the API with the operator's bearer token.
void ApiServer::Impl::ConsoleRoutes() {
  router_.Get("GET", "/ui", [](const HttpRequest&, HttpResponse& res) {
    res.status = 308;
    res.set_header("Location", "/ui/");
  });
  router_.Get("GET", R"(/ui/([^/]*))", ConsoleFile);  // 404 for a file it lacks
}

#undef SAGAD_HANDLER

StatusOr<nlohmann::json> ApiServer::Impl::VisibleInstance(const Caller& caller,
                                                          const std::string& id) {
  auto view = engine_.GetInstance(id);
  if (!view.ok() || caller.Sees(view->value("owner", ""))) return view;
  return InstanceNotFound(id);
}

StatusOr<Engine::Head> ApiServer::Impl::VisibleHead(const Caller& caller, const std::string& id) {
  auto head = engine_.GetHead(id);
  if (!head.ok() || caller.Sees(head->owner)) return head;
  return InstanceNotFound(id);
}

Status ApiServer::Impl::MayRead(const Caller& caller, const std::string& id) {
  return caller.SeesAll() ? Status::Ok() : VisibleHead(caller, id).status();
}

void ApiServer::Impl::Readyz(const HttpRequest& req, HttpResponse& res) {
  if (ProbedReadiness(req, res)) return;
  AnswerReadiness(req, res, [this] { return engine_.CheckWritable(); });
}

void ApiServer::Impl::Metrics(const HttpRequest& req, HttpResponse& res) {
  // With tokens, a scrape needs one (any role) or the metrics_token.
  const std::string h = req.get_header_value("Authorization");
  const bool scrape = h.size() > 7 && strncasecmp(h.c_str(), "Bearer ", 7) == 0 &&
                      ApiAuth::SecretMatches(h.substr(7), options_.metrics_token);
  if (!scrape && !auth_.Authenticated(req, res)) return;
  std::string out =
      "# HELP sagad_up 1 while sagad serves.\n# TYPE sagad_up gauge\nsagad_up 1\n"
      "# HELP sagad_ready 1 once recovery has been scheduled.\n# TYPE sagad_ready gauge\n"
      "sagad_ready " +
      std::string(ready_ ? "1" : "0") + "\n" +
      "# HELP sagad_http_connections_open API connections open now.\n"
      "# TYPE sagad_http_connections_open gauge\nsagad_http_connections_open " +
      std::to_string(server_.open_connections()) + "\n" +
      "# HELP sagad_store_stalled 1 while the store has had writes queued for watchdog_ms with "
      "none finished.\n# TYPE sagad_store_stalled gauge\nsagad_store_stalled " +
      std::string(StalledMs() > 0 ? "1" : "0") + "\n" + engine_.MetricsText();
  res.set_content(out, "text/plain; version=0.0.4");
}

void ApiServer::Impl::Sagas(const HttpRequest& req, HttpResponse& res) {
  if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : engine_.Definitions()) {
    nlohmann::json j = d->ToJson();
    j["required_input"] = d->RequiredInputFields();
    out.push_back(j);
  }
  Json(res, 200, {{"sagas", out}});
}

namespace {

// The {version} of a definition's path; false with a 400.
bool PathVersion(const HttpRequest& req, HttpResponse& res, int* version) {
  if (ParseVersion(req.matches[2], version)) return true;
  Problem(req, res, 400, "version must be an integer from 1 to 2147483647");
  return false;
}

}  // namespace

void ApiServer::Impl::GetDefinition(const HttpRequest& req, HttpResponse& res) {
  if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
  int version = 0;
  if (!PathVersion(req, res, &version)) return;
  SagaDefinitionPtr def = engine_.Definition(req.matches[1], version);
  if (!def || def->version != version)
    return Problem(
        req, res, 404,
        "saga '" + SanitizeUtf8(req.matches[1]) + "' has no version " + std::to_string(version));
  Json(res, 200, def->ToJson());
}

void ApiServer::Impl::PutDefinition(const HttpRequest& req, HttpResponse& res) {
  std::string who = auth_.Authorize(req, res, Role::kAdmin);
  if (who.empty()) return;
  int version = 0;
  if (!PathVersion(req, res, &version)) return;
  nlohmann::json body;
  if (!BodyObject(req, res, &body, false)) return;
  if (IsToolboxJson(body))
    return Problem(req, res, 400,
                   "this path deploys sagas; a toolbox (\"kind\": \"toolbox\") goes to "
                   "PUT /v1/toolboxes/" +
                       SanitizeUtf8(req.matches[1]) + "/versions/" + std::to_string(version));
  DeployAndAnswer(req, res, version, body, who, false);
}

void ApiServer::Impl::DeployAndAnswer(const HttpRequest& req, HttpResponse& res, int version,
                                      const nlohmann::json& body, const std::string& who,
                                      bool toolbox) {
  const std::string name = req.matches[1];
  // No thread waits for the write: its continuation answers.
  auto answer = DeferredAnswer::Start(res, nullptr);
  engine_.DeployAsync(
      name, version, body, who,
      [this, &req, answer, name, version, toolbox](StatusOr<bool> deployed) {
        answer->Give([&](HttpResponse& res) {
          // Another definition of a deployed version: a conflict, not a bad request.
          if (!deployed.ok() && deployed.status().code() == StatusCode::kAlreadyExists)
            return Problem(req, res, 409, deployed.status().message());
          if (!deployed.ok()) return ProblemFromStatus(req, res, deployed.status());
          // The view of what was deployed, of the kind the path names (the
          // handlers refuse a body of the other kind before deploying it).
          nlohmann::json view;
          if (toolbox) {
            if (ToolboxDefinitionPtr tb = engine_.Toolbox(name, version)) view = tb->ToJson();
          } else if (SagaDefinitionPtr def = engine_.Definition(name, version)) {
            view = def->ToJson();
          }
          if (view.is_null())
            return ProblemFromStatus(
                req, res,
                Internal("deployed " + name + " version " + std::to_string(version) +
                         " is not registered as a " + (toolbox ? "toolbox" : "saga")));
          res.set_header("Location", std::string(toolbox ? "/v1/toolboxes/" : "/v1/sagas/") + name +
                                         "/versions/" + std::to_string(version));
          Json(res, *deployed ? 201 : 200, view);
        });
      });
}

void ApiServer::Impl::WhoAmI(const HttpRequest& req, HttpResponse& res) {
  const Token* t = nullptr;
  if (auth_.Authorize(req, res, Role::kViewer, &t).empty()) return;
  Json(res, 200, {{"name", t ? t->name : "local"}, {"role", t ? RoleName(t->role) : "admin"}});
}

void ApiServer::Impl::PauseOrResume(const HttpRequest& req, HttpResponse& res) {
  std::string who, reason;
  if (!OperatorWithReason(req, res, &who, &reason)) return;
  // No thread waits for the write: its continuation answers.
  auto answer = DeferredAnswer::Start(res, nullptr);
  engine_.PauseServiceAsync(req.matches[1], req.matches[2] == "pause", who, reason,
                            [&req, answer](StatusOr<nlohmann::json> view) {
                              answer->Give([&](HttpResponse& res) {
                                if (!view.ok()) return ProblemFromStatus(req, res, view.status());
                                Json(res, 200, *view);
                              });
                            });
}

void ApiServer::Impl::ConsoleFile(const HttpRequest& req, HttpResponse& res) {
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
}

ApiServer::ApiServer(Engine& engine, const ApiOptions& options)
    : impl_(new Impl(engine, options)) {}
ApiServer::~ApiServer() = default;
StatusOr<int> ApiServer::Bind(const std::string& host, int port) { return impl_->Bind(host, port); }
void ApiServer::Serve() { impl_->Serve(); }
void ApiServer::Stop() { impl_->Stop(); }
void ApiServer::OnLoopEvery(std::chrono::milliseconds every, std::function<void()> fn) {
  impl_->server().OnLoopEvery(every, std::move(fn));
}
void ApiServer::OnReadable(int fd, std::function<void()> readable) {
  impl_->server().OnReadable(fd, std::move(readable));
}
void ApiServer::SetReady(bool r) { impl_->SetReady(r); }
void ApiServer::Exchange(HttpRequest& req, HttpResponse& res, std::shared_ptr<Abandonment> gone,
                         std::function<void()> done) {
  impl_->Exchange(req, res, std::move(gone), std::move(done));
}
std::vector<std::string> ApiServer::RegisteredRoutes() const { return impl_->routes(); }

}  // namespace sagad
