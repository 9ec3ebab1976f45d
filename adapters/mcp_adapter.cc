#include "adapters/mcp_adapter.h"

#include <algorithm>
#include <future>

#include "adapters/classify.h"
#include "adapters/http_client.h"
#include "util/json_limits.h"
#include "util/thread_role.h"

namespace sagad {

const char kMcpClientVersion[] = "2025-06-18";

nlohmann::json McpInitializeParams() {
  return {{"protocolVersion", kMcpClientVersion},
          {"capabilities", nlohmann::json::object()},
          {"clientInfo", {{"name", "sagad"}, {"version", "1"}}}};
}

namespace {

// What a tool's result says, as a step's result.
nlohmann::json ToolResult(const nlohmann::json& r) {
  if (r.contains("structuredContent") && r["structuredContent"].is_object())
    return r["structuredContent"];
  if (r.contains("content") && r["content"].is_array())
    for (const auto& c : r["content"])
      if (c.is_object() && c.value("type", "") == "text" && c.contains("text") &&
          c["text"].is_string()) {
        const std::string& text = c["text"].get_ref<const std::string&>();
        if (!JsonDepthWithin(text)) break;
        nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
        if (j.is_object() || j.is_array()) return j;
        break;
      }
  return {{"content", r.value("content", nlohmann::json::array())}};
}

std::string ErrorText(const nlohmann::json& r) {
  std::string out;
  if (r.contains("content") && r["content"].is_array())
    for (const auto& c : r["content"])
      if (c.is_object() && c.contains("text") && c["text"].is_string())
        out += (out.empty() ? "" : " ") + c["text"].get<std::string>();
  return SanitizeUtf8(out.substr(0, 512));
}

}  // namespace

CallResult McpCallResult(const McpReply& reply) {
  CallResult out;
  if (!reply.sent) {
    out.outcome = Outcome::kNotExecuted;
    out.error = reply.error;
    return out;
  }
  if (!reply.replied) {
    out.outcome = Outcome::kUnknown;
    out.error = reply.error;
    return out;
  }
  if (!reply.error.empty()) {
    const int c = reply.error_code;
    const bool refused = c == -32700 || c == -32600 || c == -32601 || c == -32602;
    out.outcome = refused ? Outcome::kFailed : Outcome::kUnknown;
    out.error = "MCP error " + std::to_string(c) + ": " + SanitizeUtf8(reply.error.substr(0, 512));
    return out;
  }
  if (reply.result.value("isError", false)) {
    out.outcome = Outcome::kFailed;
    out.error = "the tool answered an error: " + ErrorText(reply.result);
    return out;
  }
  out.outcome = Outcome::kCommitted;
  out.result = ToolResult(reply.result);
  out.external_ref = ExternalRef(out.result);
  return out;
}

McpAdapter::McpAdapter(std::map<std::string, ServiceConfig> services,
                       const std::map<std::string, McpServerConfig>& servers, int threads)
    : http_(std::move(services), threads) {
  // Every HTTP server is added to the client before any session sends.
  for (const auto& [name, s] : servers) {
    ServiceConfig& c = configs_[name] = s.service;
    c.name = name;
    c.mcp = true;
    c.queryable = false;
    c.idempotent = false;
    if (!s.command.empty()) continue;
    if (!client_) client_ = std::make_unique<AsyncHttpClient>(1);
    client_->AddService(c);
  }
  for (const auto& [name, s] : servers) {
    McpServerConfig sc = s;
    sc.service = configs_[name];
    sessions_[name] = sc.command.empty() ? NewHttpMcpSession(sc, *client_) : NewStdioMcpSession(sc);
  }
}

McpAdapter::~McpAdapter() {
  client_.reset();  // first: no HTTP exchange calls back into a session once it is gone
  sessions_.clear();
}

void McpAdapter::CallAsync(const CallRequest& req, CallDone done) {
  auto it = sessions_.find(req.service);
  if (it == sessions_.end()) return http_.CallAsync(req, std::move(done));
  if (req.may_write) {
    Status may = req.may_write();
    if (!may.ok()) {
      CallResult out;
      out.outcome = Outcome::kNotExecuted;
      out.withheld = true;
      out.error = may.message();
      return done(std::move(out));
    }
  }
  nlohmann::json meta = {{"io.sagad/instance", req.instance_id},
                         {"io.sagad/step", req.step},
                         {"io.sagad/attempt", req.attempt}};
  if (!req.idempotency_key.empty()) meta["io.sagad/idempotency-key"] = req.idempotency_key;
  nlohmann::json params = {{"name", req.path},
                           {"arguments", req.body.is_null() ? nlohmann::json::object() : req.body},
                           {"_meta", std::move(meta)}};
  it->second->Request("tools/call", std::move(params),
                      [done = std::move(done)](McpReply r) { done(McpCallResult(r)); });
}

void McpAdapter::QueryAsync(const std::string& service, const std::string& key,
                            const std::string& instance_id, uint64_t fencing_token, int attempt,
                            const TraceContext& trace, QueryDone done) {
  if (!configs_.count(service))
    return http_.QueryAsync(service, key, instance_id, fencing_token, attempt, trace,
                            std::move(done));
  QueryResult out;  // the engine asks an MCP server only through a reconcile read
  out.error = "MCP server '" + service + "' has no operations endpoint";
  done(std::move(out));
}

CallResult McpAdapter::Call(const CallRequest& req) { return AwaitCall(*this, req); }

QueryResult McpAdapter::Query(const std::string& service, const std::string& key,
                              const std::string& instance_id, uint64_t fencing_token, int attempt,
                              const TraceContext& trace) {
  return AwaitQuery(*this, service, key, instance_id, fencing_token, attempt, trace);
}

StatusOr<nlohmann::json> McpAdapter::ListTools(const std::string& server) {
  CheckMayBlock("an MCP server's tool list");
  auto it = sessions_.find(server);
  if (it == sessions_.end())
    return InvalidArgument("MCP server '" + server + "' is not configured");
  nlohmann::json tools = nlohmann::json::array();
  nlohmann::json params = nlohmann::json::object();
  for (int page = 0; page < 20; ++page) {
    std::promise<McpReply> p;
    auto f = p.get_future();
    it->second->Request("tools/list", params, [&p](McpReply r) { p.set_value(std::move(r)); });
    McpReply r = f.get();
    if (!r.replied || !r.error.empty())
      return Unavailable("MCP server '" + server + "' did not list its tools: " + r.error);
    for (const auto& t : r.result.value("tools", nlohmann::json::array())) tools.push_back(t);
    if (!r.result.contains("nextCursor") || !r.result["nextCursor"].is_string()) break;
    params = {{"cursor", r.result["nextCursor"]}};
  }
  return tools;
}

Status CheckToolCall(const nlohmann::json& tools, const std::string& server,
                     const std::string& tool, const nlohmann::json& arguments) {
  std::string names;
  for (const auto& t : tools) {
    if (!t.is_object() || t.value("name", "") != tool) {
      if (t.is_object()) names += (names.empty() ? "" : ", ") + t.value("name", std::string());
      continue;
    }
    const nlohmann::json schema = t.value("inputSchema", nlohmann::json::object());
    if (!schema.is_object()) return Status::Ok();
    for (const auto& req : schema.value("required", nlohmann::json::array()))
      if (req.is_string() && !arguments.contains(req.get<std::string>()))
        return InvalidArgument("tool '" + tool + "' on MCP server '" + server +
                               "' requires argument '" + req.get<std::string>() +
                               "', which the call does not give");
    if (schema.value("additionalProperties", nlohmann::json(true)) == false &&
        arguments.is_object()) {
      const nlohmann::json props = schema.value("properties", nlohmann::json::object());
      for (const auto& item : arguments.items())
        if (!props.contains(item.key()))
          return InvalidArgument("tool '" + tool + "' on MCP server '" + server +
                                 "' takes no argument '" + item.key() + "'");
    }
    return Status::Ok();
  }
  return InvalidArgument("MCP server '" + server + "' has no tool '" + tool +
                         "' (it has: " + SanitizeUtf8(names.substr(0, 512)) + ")");
}

const ServiceConfig* McpAdapter::Service(const std::string& name) const {
  auto it = configs_.find(name);
  return it != configs_.end() ? &it->second : http_.Service(name);
}

std::vector<std::string> McpAdapter::ServiceNames() const {
  std::vector<std::string> out = http_.ServiceNames();
  for (const auto& [name, c] : configs_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace sagad
