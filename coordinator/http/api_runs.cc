// The API's handlers of toolboxes and agent runs (docs/agents.md): deploy
// and read toolboxes, open a run, append a call (and wait for it), finish
// and abort. An agent needs a submitter's token; approving its calls stays
// an operator's act (the step routes).
#include "adapters/sha256.h"
#include "adapters/trace_context.h"
#include "coordinator/http/api_exchange.h"
#include "coordinator/http/http_api_impl.h"
#include "sagas/settled.h"
#include "sagas/step_key.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

// The call `call_id` as the run's view shows it, with the run's id and
// status; null if the view has no such call.
nlohmann::json CallOf(const nlohmann::json& view, const std::string& call_id) {
  if (!view.contains("calls") || !view["calls"].is_array()) return nullptr;
  for (const auto& c : view["calls"]) {
    if (c.value("call_id", "") != call_id) continue;
    nlohmann::json out = c;
    out["instance_id"] = view.value("id", "");
    out["run_status"] = view.value("status", "");
    out["idempotency_key"] = StepKey(view.value("id", ""), call_id);
    return out;
  }
  return nullptr;
}

// {version} of a toolbox's path; false with a 400.
bool ToolboxVersion(const HttpRequest& req, HttpResponse& res, int* version) {
  if (ParseVersion(req.matches[2], version)) return true;
  Problem(req, res, 400, "version must be an integer from 1 to 2147483647");
  return false;
}

}  // namespace

Status WithinRunBounds(const nlohmann::json& j, const std::string& what) {
  const size_t n = DumpJson(j).size();
  if (n <= kMaxRunTextBytes) return Status::Ok();
  return InvalidArgument(what + " is " + std::to_string(n) + " bytes as JSON; at most " +
                         std::to_string(kMaxRunTextBytes) + " are kept with a run");
}

std::string ApiServer::Impl::TooManyOpenRuns(const Caller& caller, const std::string& key,
                                             Status* failed) {
  *failed = Status::Ok();
  if (options_.max_open_runs == 0) return "";
  auto open = engine_.OpenRuns(caller.name);
  if (!open.ok()) {
    *failed = open.status();
    return "";
  }
  if (*open < options_.max_open_runs) return "";
  // At the bound, a key that opened a run already replays it.
  if (!key.empty()) {
    InstanceFilter f;
    f.idempotency_key = key;
    auto found = engine_.List(f, 1, "");
    if (found.ok() && !found->instances.empty()) return "";
  }
  return "'" + caller.name + "' has " + std::to_string(*open) +
         " runs not finished, the most max_open_runs (" + std::to_string(options_.max_open_runs) +
         ") allows: finish or abort one first";
}

bool ApiServer::Impl::OpenRunAllowed(const HttpRequest& req, HttpResponse& res,
                                     const Caller& caller, const std::string& key) {
  Status failed;
  const std::string why = TooManyOpenRuns(caller, key, &failed);
  if (!failed.ok()) {
    ProblemFromStatus(req, res, failed);
    return false;
  }
  if (why.empty()) return true;
  res.set_header("Retry-After", "60");
  Problem(req, res, 429, why);
  return false;
}

void ApiServer::Impl::RunRoutes() {
  router_.Route("GET", {"/v1/toolboxes"}, "/v1/toolboxes",
                [this](const HttpRequest& req, HttpResponse& res) {
                  if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
                  nlohmann::json out = nlohmann::json::array();
                  for (const auto& tb : engine_.Toolboxes()) out.push_back(tb->ToJson());
                  Json(res, 200, {{"toolboxes", out}});
                });
  router_.Route("GET", {"/v1/toolboxes/{toolbox}/versions/{version}"},
                R"(/v1/toolboxes/([^/]+)/versions/([^/]+))", SAGAD_HANDLER(GetToolbox));
  router_.Route("PUT", {"/v1/toolboxes/{toolbox}/versions/{version}"},
                R"(/v1/toolboxes/([^/]+)/versions/([^/]+))", SAGAD_HANDLER(PutToolbox));
  router_.Route("POST", {"/v1/toolboxes/{toolbox}/runs"}, R"(/v1/toolboxes/([^/]+)/runs)",
                SAGAD_HANDLER(OpenRun));
  router_.Route("POST", {"/v1/instances/{id}/calls"}, R"(/v1/instances/([^/]+)/calls)",
                SAGAD_HANDLER(AppendCall));
  router_.Route("POST", {"/v1/instances/{id}/decisions"}, R"(/v1/instances/([^/]+)/decisions)",
                SAGAD_HANDLER(Decide));
  router_.Route("POST", {"/v1/instances/{id}/finish", "/v1/instances/{id}/abort"},
                R"(/v1/instances/([^/]+)/(finish|abort))", SAGAD_HANDLER(EndRun));
  router_.TakesParams("POST", "/v1/toolboxes/{toolbox}/runs", {"wait", "version"});
  router_.TakesParams("POST", "/v1/instances/{id}/calls", {"wait", "until"});
  router_.Route("POST", {"/mcp"}, "/mcp", SAGAD_HANDLER(Mcp));
  router_.TakesParams("POST", "/mcp", {"toolbox", "run", "wait", "input.*"});
}

void ApiServer::Impl::GetToolbox(const HttpRequest& req, HttpResponse& res) {
  if (auth_.Authorize(req, res, Role::kViewer).empty()) return;
  int version = 0;
  if (!ToolboxVersion(req, res, &version)) return;
  ToolboxDefinitionPtr tb = engine_.Toolbox(req.matches[1], version);
  if (!tb || tb->version != version)
    return Problem(
        req, res, 404,
        "toolbox '" + SanitizeUtf8(req.matches[1]) + "' has no version " + std::to_string(version));
  Json(res, 200, tb->ToJson());
}

void ApiServer::Impl::PutToolbox(const HttpRequest& req, HttpResponse& res) {
  std::string who = auth_.Authorize(req, res, Role::kAdmin);
  if (who.empty()) return;
  int version = 0;
  if (!ToolboxVersion(req, res, &version)) return;
  nlohmann::json body;
  if (!BodyObject(req, res, &body, false)) return;
  if (body.contains("kind") && body["kind"] != "toolbox")
    return Problem(req, res, 400,
                   "this path deploys toolboxes (\"kind\": \"toolbox\"); a saga goes to "
                   "PUT /v1/sagas/{saga}/versions/{version}");
  body["kind"] = "toolbox";
  DeployAndAnswer(req, res, version, body, who, true);
}

void ApiServer::Impl::OpenRun(const HttpRequest& req, HttpResponse& res) {
  const Caller caller = auth_.Identify(req, res, Role::kSubmitter);
  if (caller.name.empty()) return;
  std::string toolbox = req.matches[1];
  double wait;
  if (!WaitParam(req, res, &wait)) return;
  nlohmann::json body;
  if (!BodyObject(req, res, &body, true)) return;
  if (Status keys = OnlyKnownKeys(body, {"input", "metadata", "version"}, "the body"); !keys.ok())
    return Problem(req, res, 400, keys.message());
  nlohmann::json input = body.value("input", nlohmann::json::object());
  nlohmann::json metadata = body.value("metadata", nlohmann::json::object());
  if (!input.is_object() || !metadata.is_object())
    return Problem(req, res, 400, "input and metadata must be JSON objects");
  if (Status big = WithinRunBounds(metadata, "metadata"); !big.ok())
    return Problem(req, res, 413, big.message());
  std::string key = req.get_header_value("Idempotency-Key");
  if (key.size() > 255)
    return Problem(req, res, 400, "Idempotency-Key is longer than 255 characters");
  key = ScopedKey(caller, key);  // each principal its own key space
  int version = 0;
  if (!SubmittedVersion(req, res, body, &version)) return;
  if (ToolboxDefinitionPtr tb = engine_.Toolbox(toolbox, version)) {
    std::vector<SchemaError> errors = tb->InputErrors(input);
    if (!errors.empty())
      return SchemaProblem(req, res, 422, "input does not match toolbox '" + toolbox + "'", "input",
                           errors);
  }
  const std::string hash = RequestHash(KeyedRequest::kRunOpening, toolbox, body);
  if (!OpenRunAllowed(req, res, caller, key)) return;
  auto pending = DeferSubmission(res, key);
  engine_.StartRunAsync(
      toolbox, version, input, metadata, key, hash,
      TraceFromHeaders(req.get_header_value("traceparent"), req.get_header_value("tracestate")),
      caller.name, [this, &req, key, wait, pending](const StatusOr<SubmitOutcome>& sub) {
        AnswerCreated(req, pending, key, sub, wait);
      });
}

void ApiServer::Impl::AppendCall(const HttpRequest& req, HttpResponse& res) {
  const Caller caller = auth_.Identify(req, res, Role::kSubmitter);
  if (caller.name.empty()) return;
  const std::string id = req.matches[1];
  double wait;
  bool decided;
  if (!WaitParam(req, res, &wait) || !UntilParam(req, res, &decided)) return;
  nlohmann::json call;
  if (!BodyObject(req, res, &call, false)) return;
  nlohmann::json said = nlohmann::json::object();  // reason and evidence, bounded together
  for (const char* f : {"reason", "evidence"})
    if (call.contains(f)) said[f] = call[f];
  if (Status big = WithinRunBounds(said, "reason + evidence"); !big.ok())
    return Problem(req, res, 413, big.message());
  res.set_header("Location", "/v1/instances/" + id);
  AppendAndWait(res, caller, id, call, wait, decided,
                [&req, decided, wait](HttpResponse& res, const CallAnswer& a) {
                  if (!a.refused.ok()) {
                    if (!a.errors.empty())
                      return SchemaProblem(req, res, 422, a.refused.message(), "arguments",
                                           a.errors);
                    // A call that cannot be made (nothing recorded) is unprocessable; a
                    // call_id already used for another call is a conflict.
                    StatusCode c = a.refused.code();
                    if (c == StatusCode::kInvalidArgument)
                      return Problem(req, res, 422, a.refused.message());
                    if (c == StatusCode::kAlreadyExists)
                      return Problem(req, res, 409, a.refused.message());
                    return ProblemFromStatus(req, res, a.refused);
                  }
                  if (a.replayed) res.set_header("Idempotent-Replayed", "true");
                  // A wait until decided is over: its answer is the call as it is now.
                  const bool waited = decided && wait > 0;
                  Json(res, waited || CallAnswered(a.call.value("status", "")) ? 200 : 202, a.call);
                });
}

void ApiServer::Impl::AppendAndWait(HttpResponse& res, const Caller& caller, const std::string& id,
                                    const nlohmann::json& call, double wait, bool decided,
                                    std::function<void(HttpResponse&, const CallAnswer&)> give) {
  const std::string& who = caller.name;
  // No thread waits for the call's commit or for the run to settle: the
  // answer is deferred now and given from whichever continuation ends it.
  auto pending = PendingSubmission::Start(res, [] {});
  auto answer = [pending, give](const CallAnswer& out) {
    pending->answer()->Give([&](HttpResponse& res) { give(res, out); });
  };
  CallAnswer out;
  // Arguments the tool's schema refuses: each error named. Another
  // principal's run does not exist for this caller.
  auto head = VisibleHead(caller, id);
  if (!head.ok()) {
    out.refused = head.status();
    return answer(out);
  }
  if (ToolboxDefinitionPtr tb =
          head->run ? engine_.Toolbox(head->saga, head->saga_version) : nullptr;
      tb && call.value("tool", nlohmann::json()).is_string()) {
    const ToolDefinition* tool = tb->Tool(call["tool"].get<std::string>());
    nlohmann::json args = call.value("arguments", nlohmann::json::object());
    std::vector<SchemaError> errors =
        tool ? tool->ArgumentErrors(args) : std::vector<SchemaError>{};
    if (!errors.empty()) {
      out.refused = InvalidArgument("arguments do not match tool '" + tool->name() + "'");
      out.errors = std::move(errors);
      return answer(out);
    }
  }
  engine_.AppendCallAsync(
      id, call, who, [this, id, call, wait, decided, pending, answer](StatusOr<bool> appended) {
        CallAnswer out;
        if (!appended.ok()) {
          out.refused = appended.status();
          return answer(out);
        }
        out.replayed = !*appended;
        const std::string call_id = call["call_id"].get<std::string>();
        auto settled = [call_id, out, answer](const StatusOr<nlohmann::json>& j) mutable {
          if (!j.ok()) out.refused = j.status();
          out.call = j.ok() ? CallOf(*j, call_id) : nlohmann::json();
          if (out.call.is_null()) out.call = {{"call_id", call_id}};
          answer(out);
        };
        if (wait <= 0) return settled(engine_.GetInstance(id));
        pending->Waiting(engine_.WaitCallAsync(id, call_id, decided,
                                               std::chrono::milliseconds(int64_t(wait * 1000)),
                                               std::move(settled)));
      });
}

void ApiServer::Impl::Decide(const HttpRequest& req, HttpResponse& res) {
  const Caller caller = auth_.Identify(req, res, Role::kSubmitter);
  if (caller.name.empty()) return;
  const std::string id = req.matches[1];
  nlohmann::json body;
  if (!BodyObject(req, res, &body, false)) return;
  if (Status big = WithinRunBounds(body, "the decision"); !big.ok())
    return Problem(req, res, 413, big.message());
  if (Status may = MayRead(caller, id); !may.ok()) return ProblemFromStatus(req, res, may);
  auto answer = DeferredAnswer::Start(res, [] {});
  engine_.DecideAsync(id, body, caller.name,
                      [&req, answer](StatusOr<std::pair<nlohmann::json, bool>> d) {
                        answer->Give([&](HttpResponse& res) {
                          if (!d.ok()) {
                            if (d.status().code() == StatusCode::kInvalidArgument)
                              return Problem(req, res, 422, d.status().message());
                            return ProblemFromStatus(req, res, d.status());
                          }
                          if (d->second) res.set_header("Idempotent-Replayed", "true");
                          Json(res, d->second ? 200 : 201, d->first);
                        });
                      });
}

void ApiServer::Impl::EndRun(const HttpRequest& req, HttpResponse& res) {
  const Caller caller = auth_.Identify(req, res, Role::kSubmitter);
  if (caller.name.empty()) return;
  const std::string& who = caller.name;
  nlohmann::json body;
  if (!BodyObject(req, res, &body, true)) return;
  if (Status keys = OnlyKnownKeys(body, {"reason"}, "the body"); !keys.ok())
    return Problem(req, res, 400, keys.message());
  std::string reason;
  if (!OptionalString(req, res, body, "reason", &reason)) return;
  const std::string id = req.matches[1];
  if (Status may = MayRead(caller, id); !may.ok()) return ProblemFromStatus(req, res, may);
  Engine::ActionDone done = DeferAction(req, res, id);
  Status s = std::string(req.matches[2]) == "finish" ? engine_.FinishRun(id, who, done)
                                                     : engine_.AbortRun(id, who, reason, done);
  if (!s.ok()) done(s);  // refused before any commit
}

}  // namespace sagad
