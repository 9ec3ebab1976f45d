#include "coordinator/http/mcp_wire.h"

#include <time.h>

#include "util/json_limits.h"

namespace sagad {

const std::vector<std::string>& McpLegacyVersions() {
  static const std::vector<std::string> v = {"2025-11-25", "2025-06-18", "2025-03-26"};
  return v;
}

std::vector<std::string> McpAllVersions() {
  std::vector<std::string> all = {kMcpModernVersion};
  for (const auto& v : McpLegacyVersions()) all.push_back(v);
  return all;
}

bool McpSpeaksLegacy(const std::string& version) {
  for (const auto& v : McpLegacyVersions())
    if (v == version) return true;
  return false;
}

nlohmann::json RpcResult(const nlohmann::json& id, nlohmann::json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

nlohmann::json RpcError(const nlohmann::json& id, int code, const std::string& message,
                        nlohmann::json data) {
  nlohmann::json e = {{"code", code}, {"message", message}};
  if (!data.is_null()) e["data"] = std::move(data);
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(e)}};
}

void Rpc(HttpResponse& res, int status, const nlohmann::json& message) {
  res.status = status;
  res.set_content(DumpJson(message), "application/json");
}

namespace {

const nlohmann::json& RunProperty() {
  static const nlohmann::json p = {
      {"type", "string"},
      {"description",
       "The run's handle, as open_run answered it: every call of one task goes "
       "to its run"}};
  return p;
}

// A tool's input schema: its arguments' schema with a required call_id
// (and, with `run_handle`, the run's handle).
nlohmann::json InputSchemaOf(const ToolDefinition& t, bool run_handle) {
  nlohmann::json s =
      t.arguments_schema.is_object() ? t.arguments_schema : nlohmann::json{{"type", "object"}};
  s["type"] = "object";
  if (!s.contains("properties") || !s["properties"].is_object())
    s["properties"] = nlohmann::json::object();
  s["properties"]["call_id"] = {
      {"type", "string"},
      {"pattern", "^[A-Za-z0-9_-]{1,64}$"},
      {"description",
       "Your name for this one call, unique in the session: the same call_id with the same "
       "arguments never acts twice (it answers the first outcome); a new call needs a new one"}};
  nlohmann::json required = s.value("required", nlohmann::json::array());
  required.push_back("call_id");
  if (run_handle) {
    s["properties"]["run"] = RunProperty();
    required.push_back("run");
  }
  s["required"] = required;
  return s;
}

}  // namespace

nlohmann::json McpToolsOf(const ToolboxDefinition& tb, bool run_handle) {
  nlohmann::json tools = nlohmann::json::array();
  for (const auto& t : tb.tools) {
    nlohmann::json annotations = {{"readOnlyHint", false},
                                  {"destructiveHint", t.step.irreversible},
                                  {"idempotentHint", true},
                                  {"openWorldHint", true}};
    std::string description = t.description;
    if (t.step.irreversible || t.step.requires_approval || t.step.approval_if)
      description += (description.empty() ? "" : " ") +
                     std::string("(An operator approves this call before it is made.)");
    tools.push_back({{"name", t.name()},
                     {"description", description},
                     {"inputSchema", InputSchemaOf(t, run_handle)},
                     {"annotations", annotations}});
  }
  return tools;
}

nlohmann::json McpRunTools(const ToolboxDefinition& tb, bool run_handle) {
  nlohmann::json tools = nlohmann::json::array();
  auto with_run = [&](nlohmann::json props, nlohmann::json required) {
    if (run_handle) {
      props["run"] = RunProperty();
      required.push_back("run");
    }
    return nlohmann::json{{"type", "object"}, {"properties", props}, {"required", required}};
  };
  const nlohmann::json annotations = {{"readOnlyHint", false},
                                      {"destructiveHint", false},
                                      {"idempotentHint", true},
                                      {"openWorldHint", false}};
  if (run_handle) {
    nlohmann::json input =
        tb.input_schema.is_object() ? tb.input_schema : nlohmann::json{{"type", "object"}};
    tools.push_back(
        {{"name", "open_run"},
         {"description", "Open a run of '" + tb.name +
                             "': one task's calls. Answers {\"run\": HANDLE}; pass it as `run` "
                             "to every other tool. The same key opens the same run again."},
         {"inputSchema",
          {{"type", "object"},
           {"properties",
            {{"input", input},
             {"key",
              {{"type", "string"},
               {"description",
                "Your name for the task (an incident, a ticket): the "
                "same key answers the same run, after a restart too"}}}}},
           {"required", nlohmann::json::array()}}},
         {"annotations", annotations}});
  }
  tools.push_back({{"name", "finish_run"},
                   {"description", "Finish the run once every call is settled (COMPLETED)."},
                   {"inputSchema", with_run(nlohmann::json::object(), nlohmann::json::array())},
                   {"annotations", annotations}});
  nlohmann::json abort_annotations = annotations;
  abort_annotations["destructiveHint"] = true;
  tools.push_back(
      {{"name", "abort_run"},
       {"description",
        "Abort the run: its committed calls are undone in reverse order "
        "(refused once an irreversible call is under way or done)."},
       {"inputSchema",
        with_run({{"reason", {{"type", "string"}, {"description", "Why, for the operator"}}}},
                 nlohmann::json::array())},
       {"annotations", abort_annotations}});
  return tools;
}

nlohmann::json McpText(const std::string& text) {
  return nlohmann::json::array({{{"type", "text"}, {"text", text}}});
}

nlohmann::json McpCallResult(const CallAnswer& a) {
  if (!a.refused.ok()) {
    std::string text = "refused: " + a.refused.message();
    for (const auto& e : a.errors)
      text += "; " + (e.path.empty() ? std::string("arguments") : e.path) + " " + e.message;
    return {{"content", McpText(text)}, {"isError", true}};
  }
  const nlohmann::json& c = a.call;
  const std::string status = c.value("status", "");
  const std::string id = c.value("call_id", "");
  nlohmann::json structured = {
      {"call_id", id}, {"status", status}, {"result", c.value("result", nlohmann::json())}};
  std::string text;
  bool error = false;
  if (status == "COMMITTED") {
    text = DumpJson(c.value("result", nlohmann::json()));
  } else if (status == "FAILED" || status == "REJECTED" || status == "CANCELLED") {
    error = true;
    text = "call " + id + " " + status + ": " +
           (status == "REJECTED"    ? "an operator refused it"
            : status == "CANCELLED" ? "its run ended before it was sent; it never will be"
                                    : c.value("last_error", ""));
  } else if (status == "AWAITING_APPROVAL") {
    text = "call " + id +
           " is waiting for an operator to approve it; call again with the same "
           "call_id later for its outcome";
  } else if (status == "NEEDS_REVIEW") {
    error = true;
    text = "call " + id +
           " needs an operator's review (its outcome is unknown); call again "
           "with the same call_id later";
  } else {
    text = "call " + id + " is " + (status.empty() ? "under way" : status) +
           "; call again with the same call_id for its outcome";
  }
  return {{"content", McpText(text)}, {"structuredContent", structured}, {"isError", error}};
}

nlohmann::json McpToolError(const std::string& text) {
  return {{"content", McpText(text)}, {"isError", true}};
}

nlohmann::json McpOutcome(nlohmann::json result, bool modern) {
  if (!modern) return result;
  result["resultType"] = "complete";
  result["_meta"] = {{"io.modelcontextprotocol/serverInfo", {{"name", "sagad"}, {"version", "5"}}}};
  return result;
}

void McpAnswer(HttpResponse& res, const nlohmann::json& id, nlohmann::json result, bool modern) {
  Rpc(res, 200, RpcResult(id, McpOutcome(std::move(result), modern)));
}

bool McpTaskStatus(const std::string& status) {
  return status == "AWAITING_APPROVAL" || status == "PLANNED" || status == "STARTED" ||
         status == "UNKNOWN" || status == "NEEDS_REVIEW" || status.empty();
}

namespace {

constexpr int64_t kTaskPollMs = 2000;

std::string IsoTime(int64_t ms) {
  char buf[40];
  const time_t s = static_cast<time_t>(ms / 1000);
  struct tm tm;
  gmtime_r(&s, &tm);
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return std::string(buf) + "." + std::to_string(1000 + ms % 1000).substr(1) + "Z";
}

// A call is decided for a task: nothing more will happen to it without
// someone asking (the view's statuses of Waiters::Decided).
bool TaskDone(const std::string& status) {
  return status == "COMMITTED" || status == "FAILED" || status == "REJECTED" ||
         status == "CANCELLED" || status == "COMPENSATED";
}

// The task of a call's view: working until it is decided, then completed
// with the result tools/call would have answered (cancelled when its run
// ended before it was sent).
}  // namespace

nlohmann::json McpTaskOf(const nlohmann::json& call, const std::string& task_id) {
  const std::string status = call.value("status", "");
  const int64_t at = call.value("appended_at", int64_t{0});
  nlohmann::json t = {{"taskId", task_id},
                      {"createdAt", IsoTime(at)},
                      {"lastUpdatedAt", IsoTime(at)},
                      {"ttlMs", nullptr},
                      {"pollIntervalMs", kTaskPollMs}};
  if (status == "CANCELLED") {
    t["status"] = "cancelled";
    t["statusMessage"] = "its run ended before it was sent; it never will be";
  } else if (TaskDone(status)) {
    CallAnswer a;
    a.call = call;
    t["status"] = "completed";
    t["result"] = McpOutcome(McpCallResult(a), true);
  } else {
    t["status"] = "working";
    t["statusMessage"] = status == "AWAITING_APPROVAL" ? "waiting for an operator to approve it"
                         : status == "NEEDS_REVIEW"
                             ? "its outcome is unknown: an operator reviews it"
                             : "under way (" + status + ")";
  }
  return t;
}

nlohmann::json McpCreateTask(const nlohmann::json& call) {
  nlohmann::json t =
      McpTaskOf(call, call.value("instance_id", "") + ":" + call.value("call_id", ""));
  t["resultType"] = "task";
  t["_meta"] = McpOutcome(nlohmann::json::object(), true)["_meta"];
  return t;
}

bool IsModernMcp(const std::string& header_version, const nlohmann::json& m) {
  if (!header_version.empty()) return header_version >= kMcpModernVersion;
  if (!m.is_object()) return false;
  if (m.value("method", nlohmann::json()) == "server/discover") return true;
  const nlohmann::json params = m.value("params", nlohmann::json());
  return params.is_object() && params.contains("_meta") && params["_meta"].is_object() &&
         params["_meta"].contains("io.modelcontextprotocol/protocolVersion");
}

}  // namespace sagad
