// POST /mcp: sagad as an MCP server over Streamable HTTP (JSON-RPC 2.0;
// protocol revisions 2025-03-26, 2025-06-18 and 2025-11-25), each session a
// run of one toolbox (docs/agents.md).
//
// initialize opens a run of /mcp?toolbox=NAME (input from input.FIELD=VALUE
// parameters; an Idempotency-Key header makes a reconnecting client find its
// run again), or resumes the run an Mcp-Session-Id header (or ?run=ID)
// names; the session id is the run's id. tools/list gives the toolbox's
// tools (each schema takes a required call_id: MCP itself has no
// idempotency key); tools/call appends a call and answers its outcome once
// it settles (or says it is still under way: the same call later answers
// it). Approval never goes through MCP. Answers are single JSON responses;
// there is no server-to-client stream (GET answers 405).
#include "adapters/sha256.h"
#include "coordinator/http/api_exchange.h"
#include "coordinator/http/http_api_impl.h"
#include "coordinator/http/mcp_wire.h"
#include "util/json_limits.h"

namespace sagad {
namespace {
// The answer to initialize: the session is the run.
void Initialized(HttpResponse& res, const nlohmann::json& id, const std::string& version,
                 const std::string& run) {
  res.set_header("Mcp-Session-Id", run);
  Rpc(res, 200,
      RpcResult(id, {{"protocolVersion", version},
                     {"capabilities", {{"tools", {{"listChanged", false}}}}},
                     {"serverInfo", {{"name", "sagad"}, {"version", "4"}}},
                     {"instructions",
                      "Each tool call takes a call_id: your name for that one call. Sending the "
                      "same call_id again (after a lost reply, a restart) never acts twice: it "
                      "answers the first outcome. Irreversible tools wait for an operator."}}));
}

}  // namespace

void ApiServer::Impl::Mcp(const HttpRequest& req, HttpResponse& res) {
  const Caller caller = auth_.Identify(req, res, Role::kSubmitter);
  if (caller.name.empty()) return;
  // JSON only: no other web site can post to sagad with a simple form.
  if (!IsJsonContentType(req.get_header_value("Content-Type")))
    return Problem(req, res, 415, "Content-Type must be application/json");
  if (!JsonDepthWithin(req.body))
    return Rpc(res, 400, RpcError(nullptr, -32700, "Parse error: nested too deep"));
  nlohmann::json m = nlohmann::json::parse(req.body, nullptr, false);
  if (m.is_discarded()) return Rpc(res, 400, RpcError(nullptr, -32700, "Parse error"));
  if (m.is_array())
    return Rpc(res, 400, RpcError(nullptr, -32600, "Invalid Request: batches are not supported"));
  const nlohmann::json id = m.is_object() ? m.value("id", nlohmann::json()) : nlohmann::json();
  if (!m.is_object() || m.value("jsonrpc", "") != "2.0" ||
      (m.contains("method") && !m["method"].is_string()) ||
      !(id.is_null() || id.is_string() || id.is_number_integer()))
    return Rpc(res, 400, RpcError(nullptr, -32600, "Invalid Request"));
  // A request's id is a string or an integer, never null (MCP: "MUST NOT be
  // null"); a notification has none.
  if (m.contains("id") && id.is_null())
    return Rpc(res, 400, RpcError(nullptr, -32600, "Invalid Request: id must not be null"));
  const std::string asked = req.get_header_value("MCP-Protocol-Version");
  if (IsModernMcp(asked, m)) return McpModern(req, res, m, caller);
  if (!asked.empty() && !McpSpeaksLegacy(asked))
    return Rpc(res, 400,
               RpcError(nullptr, -32022, "Bad Request: unsupported protocol version " + asked,
                        {{"supported", McpAllVersions()}, {"requested", asked}}));
  // A notification or a response from the client: accepted, no answer.
  if (!m.contains("method") || !m.contains("id")) {
    res.status = 202;
    return;
  }
  const std::string method = m["method"];
  const nlohmann::json params = m.value("params", nlohmann::json::object());
  if (!params.is_object()) return Rpc(res, 200, RpcError(id, -32602, "params must be an object"));
  if (method == "initialize") return McpInitialize(req, res, id, params, caller);
  // Every other request names its session: the run.
  std::string run = req.get_header_value("Mcp-Session-Id");
  if (run.empty())
    return Rpc(res, 400, RpcError(id, -32000, "Bad Request: Mcp-Session-Id header is required"));
  auto head = VisibleHead(caller, run);  // a session is its principal's
  if (!head.ok() || !head->run)
    return Rpc(res, 404, RpcError(id, -32001, "Session not found (no run " + run + ")"));
  ToolboxDefinitionPtr tb = engine_.Toolbox(head->saga, head->saga_version);
  if (method == "ping") return Rpc(res, 200, RpcResult(id, nlohmann::json::object()));
  if (method == "tools/list") {
    if (!tb) return Rpc(res, 200, RpcError(id, -32603, "the run's toolbox is not registered here"));
    nlohmann::json tools = McpToolsOf(*tb, false);
    for (auto& t : McpRunTools(*tb, false)) tools.push_back(std::move(t));
    return Rpc(res, 200, RpcResult(id, {{"tools", tools}}));
  }
  if (method != "tools/call")
    return Rpc(res, 200, RpcError(id, -32601, "Method not found: " + SanitizeUtf8(method)));
  if (!tb) return Rpc(res, 200, RpcError(id, -32603, "the run's toolbox is not registered here"));
  McpToolCall(req, res, id, params, run, *tb, caller, false);
}

void ApiServer::Impl::McpToolCall(const HttpRequest& req, HttpResponse& res,
                                  const nlohmann::json& id, const nlohmann::json& params,
                                  const std::string& run, const ToolboxDefinition& tb,
                                  const Caller& caller, bool modern, bool tasks) {
  const nlohmann::json name = params.value("name", nlohmann::json());
  nlohmann::json args = params.value("arguments", nlohmann::json::object());
  if (!name.is_string() || !args.is_object())
    return Rpc(res, 200,
               RpcError(id, -32602, "tools/call needs a tool name and arguments (object)"));
  if (modern) args.erase("run");  // the handle, never an argument of the tool
  if (name == "finish_run" || name == "abort_run")
    return McpEndRun(res, id, run, name, args, caller, modern);
  if (!tb.Tool(name.get<std::string>()))
    return Rpc(res, 200,
               RpcError(id, -32602, "Unknown tool: " + SanitizeUtf8(name.get<std::string>())));
  nlohmann::json call = {{"tool", name}, {"call_id", args.value("call_id", nlohmann::json())}};
  args.erase("call_id");
  call["arguments"] = std::move(args);
  if (!call["call_id"].is_string()) {
    CallAnswer a;
    a.refused = InvalidArgument("arguments.call_id is required: your name for this one call");
    return McpAnswer(res, id, McpCallResult(a), modern);
  }
  const nlohmann::json meta = params.value("_meta", nlohmann::json::object());
  if (meta.is_object() && meta.contains("reason") && meta["reason"].is_string())
    call["reason"] = meta["reason"];
  double wait = 20;
  if (req.has_param("wait") && !WaitParam(req, res, &wait)) return;
  AppendAndWait(res, caller, run, call, wait, false,
                [id, modern, tasks](HttpResponse& res, const CallAnswer& a) {
                  // A refused call has no view (a.call is null).
                  if (tasks && a.refused.ok() && a.call.is_object() &&
                      McpTaskStatus(a.call.value("status", "")))
                    return Rpc(res, 200, RpcResult(id, McpCreateTask(a.call)));
                  McpAnswer(res, id, McpCallResult(a), modern);
                });
}

void ApiServer::Impl::StartMcpRun(const Caller& caller, const std::string& toolbox,
                                  const nlohmann::json& input, const std::string& key,
                                  const nlohmann::json& client, const std::string& version,
                                  Completion<StatusOr<std::string>> opened) {
  nlohmann::json metadata = {{"agent", caller.name}, {"via", "mcp"}, {"protocol_version", version}};
  if (client.is_object() && client.contains("name")) metadata["mcp_client"] = client["name"];
  engine_.StartRunAsync(
      toolbox, 0, input, metadata, key, RequestHash(KeyedRequest::kMcpSession, toolbox, input),
      TraceFromHeaders("", ""), caller.name,
      [this, key, opened = std::move(opened)](const StatusOr<SubmitOutcome>& sub) {
        if (sub.ok() && !key.empty()) engine_.FinishSubmission(key, 0, nullptr);
        if (!sub.ok()) return opened(sub.status());
        opened(sub->instance_id);
      });
}

void ApiServer::Impl::McpEndRun(HttpResponse& res, const nlohmann::json& id, const std::string& run,
                                const std::string& tool, const nlohmann::json& args,
                                const Caller& caller, bool modern) {
  const nlohmann::json reason = args.value("reason", nlohmann::json(""));
  if (!reason.is_string())
    return McpAnswer(res, id, McpToolError("reason must be a string"), modern);
  // No thread waits for the run's commit: its continuation answers.
  auto answer = DeferredAnswer::Start(res, nullptr);
  Engine::ActionDone done = [this, answer, id, run, modern](Status s) {
    nlohmann::json out;
    if (!s.ok()) {
      out = McpToolError(s.message());
    } else {
      auto view = engine_.GetInstance(run);
      const std::string status = view.ok() ? view->value("status", "") : "";
      out = {{"content", McpText("run " + run + " is " + status)},
             {"structuredContent", {{"run", run}, {"status", status}}},
             {"isError", false}};
    }
    answer->Give([&](HttpResponse& res) { McpAnswer(res, id, std::move(out), modern); });
  };
  Status s = tool == "finish_run" ? engine_.FinishRun(run, caller.name, done)
                                  : engine_.AbortRun(run, caller.name, reason, done);
  if (!s.ok()) done(s);  // refused before any commit
}

void ApiServer::Impl::McpInitialize(const HttpRequest& req, HttpResponse& res,
                                    const nlohmann::json& id, const nlohmann::json& params,
                                    const Caller& caller) {
  const nlohmann::json asked = params.value("protocolVersion", nlohmann::json());
  if (!asked.is_string()) return Rpc(res, 200, RpcError(id, -32602, "protocolVersion is required"));
  // A version this server does not speak is answered with the newest it does.
  const std::string version =
      McpSpeaksLegacy(asked) ? asked.get<std::string>() : McpLegacyVersions()[0];
  std::string run = req.get_header_value("Mcp-Session-Id");
  if (run.empty()) run = req.get_param_value("run");
  if (!run.empty()) {
    auto head = VisibleHead(caller, run);
    if (!head.ok() || !head->run)
      return Rpc(res, 404, RpcError(id, -32001, "Session not found (no run " + run + ")"));
    const std::string toolbox = req.get_param_value("toolbox");
    if (!toolbox.empty() && toolbox != head->saga)
      return Rpc(res, 200,
                 RpcError(id, -32602,
                          "session " + run + " is a run of toolbox '" + head->saga + "', not '" +
                              SanitizeUtf8(toolbox) + "'"));
  } else {
    const std::string toolbox = req.get_param_value("toolbox");
    if (toolbox.empty())
      return Rpc(res, 200, RpcError(id, -32602, "name the toolbox: POST /mcp?toolbox=NAME"));
    nlohmann::json input = nlohmann::json::object();
    for (const auto& [k, v] : req.params)
      if (k.rfind("input.", 0) == 0 && k.size() > 6) input[k.substr(6)] = v;
    const std::string key = ScopedKey(caller, req.get_header_value("Idempotency-Key"));
    Status failed;
    const std::string too_many = TooManyOpenRuns(caller, key, &failed);
    if (!failed.ok())
      return Rpc(res, 200, RpcError(id, -32603, "cannot open a run: " + failed.message()));
    if (!too_many.empty())
      return Rpc(res, 429, RpcError(id, -32000, "cannot open a run: " + too_many));
    // No thread waits for the run's creation: its continuation answers.
    auto answer = DeferredAnswer::Start(res, nullptr);
    StartMcpRun(caller, toolbox, input, key, params.value("clientInfo", nlohmann::json()), version,
                [answer, id, version](const StatusOr<std::string>& run) {
                  answer->Give([&](HttpResponse& res) {
                    if (!run.ok())
                      return Rpc(
                          res, 200,
                          RpcError(id, -32602, "cannot open a run: " + run.status().message()));
                    Initialized(res, id, version, *run);
                  });
                });
    return;
  }
  Initialized(res, id, version, run);
}

}  // namespace sagad
