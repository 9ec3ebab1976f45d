// POST /mcp in the 2026-07-28 revision of MCP (docs/agents.md, "MCP"): no
// initialize and no session; each request stands alone with its version,
// client info and capabilities in params._meta, mirrored in the
// MCP-Protocol-Version, Mcp-Method and Mcp-Name headers (checked: a header
// that is missing or says otherwise is 400 HeaderMismatch, -32020). A
// version sagad does not speak is 400 UnsupportedProtocolVersion (-32022)
// listing those it does; a method it does not serve is 404, -32601.
//
// The run is a handle: open_run answers {"run": ID}; every tool of the
// toolbox takes `run` and `call_id`; finish_run and abort_run end it. A
// handle is its principal's: another principal's run does not exist.
// The toolbox is the endpoint's: POST /mcp?toolbox=NAME (a call on a run
// of another toolbox is refused).
//
// Tasks (the io.modelcontextprotocol/tasks extension): to a client that
// declares it on the request, a call still waiting for an operator or in
// doubt when its wait ends answers a task instead of a result. The task id
// is the call's key ("<run>:<call_id>"): the call is recorded before the
// answer, so the task is durable, and tasks/get answers from the run's view
// (working until the call is decided; then completed, with the result the
// call would have answered).
#include "coordinator/http/api_exchange.h"
#include "coordinator/http/http_api_impl.h"
#include "coordinator/http/mcp_wire.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

constexpr int kHeaderMismatch = -32020;
constexpr int kUnsupportedVersion = -32022;
constexpr char kVersionKey[] = "io.modelcontextprotocol/protocolVersion";
constexpr char kTasksExtension[] = "io.modelcontextprotocol/tasks";

bool WantsTasks(const nlohmann::json& meta) {
  const nlohmann::json caps =
      meta.is_object() ? meta.value("io.modelcontextprotocol/clientCapabilities", nlohmann::json())
                       : nlohmann::json();
  return caps.is_object() && caps.contains("extensions") && caps["extensions"].is_object() &&
         caps["extensions"].contains(kTasksExtension);
}

// A header value in the revision's Base64 sentinel form
// ("=?base64?...?=") decoded; any other value as it is.
std::string HeaderValue(const std::string& v) {
  static const std::string head = "=?base64?", tail = "?=";
  if (v.size() < head.size() + tail.size() || v.compare(0, head.size(), head) != 0 ||
      v.compare(v.size() - tail.size(), tail.size(), tail) != 0)
    return v;
  const std::string b64 = v.substr(head.size(), v.size() - head.size() - tail.size());
  static const std::string alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int bits = 0, acc = 0;
  for (char c : b64) {
    if (c == '=') break;
    const size_t at = alphabet.find(c);
    if (at == std::string::npos) return "\x01invalid";  // never equals a body value
    acc = (acc << 6) | static_cast<int>(at);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

// Why the request's headers do not match its body ("" when they do).
std::string HeaderMismatch(const HttpRequest& req, const std::string& method,
                           const nlohmann::json& params, const std::string& version) {
  const std::string header = req.get_header_value("MCP-Protocol-Version");
  if (header.empty()) return "the MCP-Protocol-Version header is required";
  if (header != version)
    return "MCP-Protocol-Version header '" + SanitizeUtf8(header) + "' does not match _meta's '" +
           SanitizeUtf8(version) + "'";
  const std::string mcp_method = req.get_header_value("Mcp-Method");
  if (mcp_method.empty()) return "the Mcp-Method header is required";
  if (mcp_method != method)
    return "Mcp-Method header '" + SanitizeUtf8(mcp_method) + "' does not match body value '" +
           SanitizeUtf8(method) + "'";
  if (method == "tools/call") {
    if (!req.has_header("Mcp-Name")) return "the Mcp-Name header is required for tools/call";
    const nlohmann::json name = params.value("name", nlohmann::json());
    if (!name.is_string() || HeaderValue(req.get_header_value("Mcp-Name")) != name)
      return "Mcp-Name header does not match the body's tool name";
  }
  return "";
}

nlohmann::json Discovered() {
  return McpOutcome(
      {{"supportedVersions", McpAllVersions()},
       {"capabilities",
        {{"tools", {{"listChanged", false}}},
         {"extensions", {{kTasksExtension, nlohmann::json::object()}}}}},
       {"instructions",
        "Open a run with open_run (your key for the task makes it the same run again), then "
        "pass its handle as `run` to every tool, each call with a call_id: your name for that "
        "one call. The same call_id again never acts twice: it answers the first outcome. "
        "Irreversible tools wait for an operator. End with finish_run or abort_run."},
       {"ttlMs", 0},
       {"cacheScope", "private"}},
      true);
}

}  // namespace

void ApiServer::Impl::McpModern(const HttpRequest& req, HttpResponse& res, const nlohmann::json& m,
                                const Caller& caller) {
  const nlohmann::json id = m.value("id", nlohmann::json());
  if (!m.contains("method") || !m.contains("id")) {  // a notification: nothing to answer
    res.status = 202;
    return;
  }
  const std::string method = m["method"];
  const nlohmann::json params = m.value("params", nlohmann::json::object());
  if (!params.is_object()) return Rpc(res, 400, RpcError(id, -32602, "params must be an object"));
  const nlohmann::json meta = params.value("_meta", nlohmann::json::object());
  const nlohmann::json version =
      meta.is_object() ? meta.value(kVersionKey, nlohmann::json()) : nlohmann::json();
  if (!version.is_string())
    return Rpc(res, 400,
               RpcError(id, -32602,
                        std::string("params._meta[\"") + kVersionKey +
                            "\"] is required in this revision"));
  if (std::string why = HeaderMismatch(req, method, params, version); !why.empty())
    return Rpc(res, 400, RpcError(id, kHeaderMismatch, "Header mismatch: " + why));
  if (version != kMcpModernVersion)
    return Rpc(res, 400,
               RpcError(id, kUnsupportedVersion, "Unsupported protocol version",
                        {{"supported", McpAllVersions()}, {"requested", version}}));
  if (method == "server/discover") return Rpc(res, 200, RpcResult(id, Discovered()));
  if (method == "tasks/get" || method == "tasks/cancel" || method == "tasks/update")
    return McpTask(res, id, method, params, caller);
  if (method != "tools/list" && method != "tools/call")
    return Rpc(res, 404, RpcError(id, -32601, "Method not found: " + SanitizeUtf8(method)));
  const std::string toolbox = req.get_param_value("toolbox");
  ToolboxDefinitionPtr tb = toolbox.empty() ? nullptr : engine_.Toolbox(toolbox, 0);
  if (!tb)
    return Rpc(res, 200,
               RpcError(id, -32602,
                        toolbox.empty() ? "name the toolbox: POST /mcp?toolbox=NAME"
                                        : "no toolbox '" + SanitizeUtf8(toolbox) + "'"));
  if (method == "tools/list") {
    nlohmann::json tools = McpRunTools(*tb, true);
    for (auto& t : McpToolsOf(*tb, true)) tools.push_back(std::move(t));
    return McpAnswer(res, id, {{"tools", tools}, {"ttlMs", 0}, {"cacheScope", "private"}}, true);
  }
  const nlohmann::json name = params.value("name", nlohmann::json());
  const nlohmann::json args = params.value("arguments", nlohmann::json::object());
  if (!name.is_string() || !args.is_object())
    return Rpc(res, 200,
               RpcError(id, -32602, "tools/call needs a tool name and arguments (object)"));
  if (name == "open_run")
    return McpOpenRun(res, id, tb->name, args,
                      meta.value("io.modelcontextprotocol/clientInfo", nlohmann::json()), caller);
  // Every other tool names its run: the caller's own, of this toolbox.
  const nlohmann::json run = args.value("run", nlohmann::json());
  auto tool_error = [&](const std::string& text) { McpAnswer(res, id, McpToolError(text), true); };
  if (!run.is_string())
    return tool_error("arguments.run is required: the handle open_run answered");
  auto head = VisibleHead(caller, run);
  if (!head.ok() || !head->run)
    return tool_error("no run " + SanitizeUtf8(run.get<std::string>()) +
                      " (open one with open_run)");
  if (head->saga != tb->name)
    return tool_error("run " + run.get<std::string>() + " is a run of toolbox '" + head->saga +
                      "', not of this endpoint's '" + tb->name + "'");
  ToolboxDefinitionPtr own = engine_.Toolbox(tb->name, head->saga_version);
  if (!own) return Rpc(res, 200, RpcError(id, -32603, "the run's toolbox is not registered here"));
  McpToolCall(req, res, id, params, run, *own, caller, true, WantsTasks(meta));
}

void ApiServer::Impl::McpTask(HttpResponse& res, const nlohmann::json& id,
                              const std::string& method, const nlohmann::json& params,
                              const Caller& caller) {
  const nlohmann::json task = params.value("taskId", nlohmann::json());
  const size_t colon = task.is_string() ? task.get<std::string>().rfind(':') : std::string::npos;
  if (colon == std::string::npos)
    return Rpc(res, 200, RpcError(id, -32602, "taskId must name a task this server gave"));
  const std::string run = task.get<std::string>().substr(0, colon);
  const std::string call_id = task.get<std::string>().substr(colon + 1);
  auto view = VisibleInstance(caller, run);  // a task is its principal's
  nlohmann::json call;
  if (view.ok())
    for (const auto& c : view->value("calls", nlohmann::json::array()))
      if (c.value("call_id", "") == call_id) call = c;
  if (call.is_null())
    return Rpc(res, 200, RpcError(id, -32602, "no task " + SanitizeUtf8(task.get<std::string>())));
  // Cancellation is cooperative: an appended call is never taken back
  // (abort_run undoes a run); update has no input to take.
  if (method != "tasks/get") return McpAnswer(res, id, {}, true);
  McpAnswer(res, id, McpTaskOf(call, task), true);
}

void ApiServer::Impl::McpOpenRun(HttpResponse& res, const nlohmann::json& id,
                                 const std::string& toolbox, const nlohmann::json& args,
                                 const nlohmann::json& client, const Caller& caller) {
  auto tool_error = [&](const std::string& text) { McpAnswer(res, id, McpToolError(text), true); };
  const nlohmann::json input = args.value("input", nlohmann::json::object());
  const nlohmann::json key_arg = args.value("key", nlohmann::json(""));
  if (!input.is_object() || !key_arg.is_string())
    return tool_error("input must be an object and key a string");
  if (key_arg.get<std::string>().size() > 255)
    return tool_error("key is longer than 255 characters");
  const std::string key = ScopedKey(caller, key_arg.get<std::string>());
  Status failed;
  const std::string too_many = TooManyOpenRuns(caller, key, &failed);
  if (!failed.ok()) return tool_error("cannot open a run: " + failed.message());
  if (!too_many.empty()) return tool_error("cannot open a run: " + too_many);
  // No thread waits for the run's creation: its continuation answers. The
  // input is checked against the toolbox's schema there (the engine's).
  auto answer = DeferredAnswer::Start(res, nullptr);
  StartMcpRun(caller, toolbox, input, key, client, kMcpModernVersion,
              [answer, id](const StatusOr<std::string>& run) {
                nlohmann::json out =
                    !run.ok() ? McpToolError("cannot open a run: " + run.status().message())
                              : nlohmann::json{{"content", McpText("{\"run\":\"" + *run + "\"}")},
                                               {"structuredContent", {{"run", *run}}},
                                               {"isError", false}};
                answer->Give([&](HttpResponse& res) { McpAnswer(res, id, std::move(out), true); });
              });
}

}  // namespace sagad
