#include "sagas/toolbox.h"

#include <set>

#include "sagas/search_attributes.h"
#include "sagas/template.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

const std::vector<const char*>& ToolboxKeys() {
  static const std::vector<const char*> k = {
      "kind",           "name",    "version",   "description",       "tools", "input_schema",
      "idle_timeout_s", "on_idle", "max_calls", "search_attributes", "guards"};
  return k;
}

std::vector<std::string> SplitDots(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == '.')
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

std::vector<SchemaError> ObjectErrors(const std::shared_ptr<const InputSchema>& schema,
                                      const nlohmann::json& value) {
  if (!value.is_object()) return {{"", "must be a JSON object"}};
  return schema ? schema->Check(value) : std::vector<SchemaError>{};
}

// The argument names a tool declares (its schema's properties); null when
// it declares none (any argument may be named).
std::unique_ptr<std::set<std::string>> DeclaredArguments(const ToolDefinition& t) {
  if (!t.arguments_schema.is_object() || !t.arguments_schema.contains("properties")) return nullptr;
  auto out = std::make_unique<std::set<std::string>>();
  for (const auto& item : t.arguments_schema["properties"].items()) out->insert(item.key());
  return out;
}

// One {{expr}} of a tool's call: what it may name (see toolbox.h).
Status CheckRef(const ToolDefinition& t, const std::string& expr, bool compensation,
                const std::set<std::string>* args) {
  std::vector<std::string> p = SplitDots(expr);
  bool empty_part = false;
  for (const auto& s : p) empty_part = empty_part || s.empty();
  const std::string& root = p[0];
  bool ok =
      !empty_part && expr.find_first_of("{}") == std::string::npos &&
      ((root == "args" && p.size() >= 2) || (root == "input" && p.size() >= 2) ||
       (root == "calls" && p.size() >= 3 && IsCallId(p[1])) || (root == "result" && compensation));
  if (!ok)
    return InvalidArgument("tool '" + t.name() + "' " +
                           (compensation ? "compensation" : "forward") +
                           ": template reference '{{" + expr +
                           "}}' must be args.<field>, input.<field>, "
                           "calls.<call_id>.<field>" +
                           (compensation ? " or result[.<field>]" : "") +
                           (root == "result" ? " (a call's own result is known only to its "
                                               "compensation)"
                                             : ""));
  if (root == "args" && args && !args->count(p[1]))
    return InvalidArgument("tool '" + t.name() + "' refers to argument '" + p[1] +
                           "', which its arguments_schema does not declare");
  return Status::Ok();
}

Status CheckCall(const ToolDefinition& t, const CallSpec& c, bool compensation) {
  SAGAD_RETURN_IF_ERROR(
      CheckCallShape(c, "tool '" + t.name() + "' " + (compensation ? "compensation" : "forward")));
  auto args = DeclaredArguments(t);
  RefMap check = [&](const std::string& e) -> StatusOr<std::string> {
    SAGAD_RETURN_IF_ERROR(CheckRef(t, e, compensation, args.get()));
    return e;
  };
  SAGAD_RETURN_IF_ERROR(RewriteRefs(c.path, check).status());
  return RewriteRefs(c.body, check).status();
}

Status ValidateTool(const ToolDefinition& t) {
  const StepDefinition& st = t.step;
  if (!IsDefinitionName(st.name))
    return InvalidArgument("tool name must be 1-64 of [A-Za-z0-9_-], got '" +
                           SanitizeUtf8(st.name) + "'");
  if (st.after) return InvalidArgument("tool '" + st.name + "': a tool has no \"after\"");
  // MCP's run tools and the names MCP passes among a tool's arguments.
  if (st.name == "open_run" || st.name == "finish_run" || st.name == "abort_run")
    return InvalidArgument("tool name '" + st.name +
                           "' is taken by sagad's MCP server (it opens and ends runs)");
  for (const char* taken : {"call_id", "run"}) {
    const std::string why =
        "tool '" + st.name + "': an argument may not be named " + taken +
        " (over MCP it is given among the arguments: " +
        (std::string(taken) == "call_id" ? "the call's own name" : "the run's handle") + ")";
    if (auto declared = DeclaredArguments(t); declared && declared->count(taken))
      return InvalidArgument(why);
    if (t.arguments_schema.is_object() && t.arguments_schema.contains("required") &&
        t.arguments_schema["required"].is_array())
      for (const auto& r : t.arguments_schema["required"])
        if (r == taken) return InvalidArgument(why);
  }
  SAGAD_RETURN_IF_ERROR(CheckCall(t, st.forward, false));
  SAGAD_RETURN_IF_ERROR(CheckReconcileShape(st, "tool '" + st.name + "'"));
  if (st.reconcile) SAGAD_RETURN_IF_ERROR(CheckCall(t, st.reconcile->read, false));
  if (!st.irreversible && !st.compensation)
    return InvalidArgument("tool '" + st.name +
                           "' is reversible but has no compensation (add \"compensation\" or "
                           "mark it \"irreversible\": true)");
  if (st.irreversible && st.compensation)
    return InvalidArgument("tool '" + st.name + "' is irreversible but declares a compensation");
  if (st.compensation) SAGAD_RETURN_IF_ERROR(CheckCall(t, *st.compensation, true));
  if (st.approval_if) {
    auto args = DeclaredArguments(t);
    static const std::set<std::string> kOps = {"==", "!=", ">", ">=", "<", "<="};
    if (!kOps.count(st.approval_if->op))
      return InvalidArgument("tool '" + st.name + "': approval_if op '" +
                             SanitizeUtf8(st.approval_if->op) + "' is not one of == != > >= < <=");
    if (args && !args->count(st.approval_if->field))
      return InvalidArgument("tool '" + st.name + "': approval_if names argument '" +
                             SanitizeUtf8(st.approval_if->field) +
                             "', which its arguments_schema does not declare");
  }
  if (st.approval_timeout_action != "reject" && st.approval_timeout_action != "escalate")
    return InvalidArgument("tool '" + st.name +
                           "': approval_timeout_action must be \"reject\" or \"escalate\"");
  if (!t.arguments_schema.is_null()) {
    auto compiled = InputSchema::Compile(t.arguments_schema);
    if (!compiled.ok())
      return InvalidArgument("tool '" + st.name +
                             "' arguments_schema: " + compiled.status().message());
  }
  return Status::Ok();
}

StatusOr<ToolDefinition> ToolFromJson(const nlohmann::json& js) {
  if (!js.is_object()) return InvalidArgument("each tool must be a JSON object");
  ToolDefinition t;
  nlohmann::json step = js;
  t.description = js.value("description", std::string());
  step.erase("description");
  if (js.contains("arguments_schema") && !js["arguments_schema"].is_null()) {
    t.arguments_schema = js["arguments_schema"];
    auto compiled = InputSchema::Compile(t.arguments_schema);
    if (!compiled.ok())
      return InvalidArgument("tool '" + SanitizeUtf8(js.value("name", std::string("?"))) +
                             "' arguments_schema: " + compiled.status().message());
    t.schema = std::make_shared<const InputSchema>(std::move(*compiled));
  }
  step.erase("arguments_schema");
  if (step.contains("after"))
    return InvalidArgument("tool '" + SanitizeUtf8(js.value("name", std::string("?"))) +
                           "': a tool has no \"after\" (a run orders its calls)");
  auto st = StepFromJson(step);
  if (!st.ok()) {
    // The step's checks speak of a step; here it is a tool.
    std::string m = st.status().message();
    for (const char* w : {"step '", "a step "})
      if (m.rfind(w, 0) == 0)
        m = std::string(w[0] == 's' ? "tool '" : "a tool ") + m.substr(std::string(w).size());
    return InvalidArgument(m);
  }
  t.step = std::move(*st);
  return t;
}

}  // namespace

bool IsCallId(const std::string& id) { return IsDefinitionName(id) && id != "input"; }

bool IsToolboxJson(const nlohmann::json& j) {
  return j.is_object() && j.contains("kind") && j["kind"] == "toolbox";
}

std::vector<SchemaError> ToolDefinition::ArgumentErrors(const nlohmann::json& arguments) const {
  return ObjectErrors(schema, arguments);
}

bool ToolDefinition::operator==(const ToolDefinition& o) const {
  return step == o.step && description == o.description && arguments_schema == o.arguments_schema;
}

const ToolDefinition* ToolboxDefinition::Tool(const std::string& tool) const {
  for (const auto& t : tools)
    if (t.name() == tool) return &t;
  return nullptr;
}

std::vector<SchemaError> ToolboxDefinition::InputErrors(const nlohmann::json& input) const {
  return ObjectErrors(schema, input);
}

bool ToolboxDefinition::operator==(const ToolboxDefinition& o) const {
  return ToJson() == o.ToJson();
}

nlohmann::json ToolboxDefinition::ToJson() const {
  nlohmann::json ts = nlohmann::json::array();
  for (const auto& t : tools) {
    nlohmann::json j = StepToJson(t.step);
    j["description"] = t.description;
    if (!t.arguments_schema.is_null()) j["arguments_schema"] = t.arguments_schema;
    ts.push_back(std::move(j));
  }
  nlohmann::json out = {{"kind", "toolbox"},     {"name", name},
                        {"version", version},    {"idle_timeout_s", idle_timeout_s},
                        {"on_idle", on_idle},    {"max_calls", max_calls},
                        {"tools", std::move(ts)}};
  if (!description.empty()) out["description"] = description;
  if (!input_schema.is_null()) out["input_schema"] = input_schema;
  if (!search_attributes.empty()) out["search_attributes"] = search_attributes;
  if (!guards.empty()) {
    nlohmann::json gs = nlohmann::json::array();
    for (const auto& g : guards) gs.push_back(g.ToJson());
    out["guards"] = std::move(gs);
  }
  return out;
}

StatusOr<ToolboxDefinition> ToolboxDefinition::FromJson(const nlohmann::json& j) {
  ToolboxDefinition tb;
  try {
    if (!IsToolboxJson(j))
      return InvalidArgument("a toolbox definition is a JSON object with \"kind\": \"toolbox\"");
    SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(j, ToolboxKeys(), "the toolbox definition"));
    tb.name = j.at("name").get<std::string>();
    tb.description = j.value("description", std::string());
    const std::string where = "toolbox definition";
    SAGAD_RETURN_IF_ERROR(IntField(j, "version", 1, INT32_MAX, where, &tb.version));
    SAGAD_RETURN_IF_ERROR(
        IntField(j, "idle_timeout_s", 0, kMaxDurationMs / 1000, where, &tb.idle_timeout_s));
    SAGAD_RETURN_IF_ERROR(IntField(j, "max_calls", 1, kMaxMaxCalls, where, &tb.max_calls));
    tb.on_idle = j.value("on_idle", std::string("review"));
    SAGAD_RETURN_IF_ERROR(SearchAttributesFromJson(j, "toolbox definition", &tb.search_attributes));
    if (j.contains("input_schema") && !j["input_schema"].is_null()) {
      tb.input_schema = j["input_schema"];
      auto compiled = InputSchema::Compile(tb.input_schema);
      if (!compiled.ok())
        return InvalidArgument("toolbox input_schema: " + compiled.status().message());
      tb.schema = std::make_shared<const InputSchema>(std::move(*compiled));
    }
    if (!j.contains("tools") || !j["tools"].is_array())
      return InvalidArgument("the toolbox definition has no \"tools\" (an array of tools)");
    for (const auto& js : j["tools"]) {
      auto t = ToolFromJson(js);
      if (!t.ok()) return t.status();
      tb.tools.push_back(std::move(*t));
    }
    SAGAD_RETURN_IF_ERROR(GuardsFromJson(j, tb.tools, &tb.guards));
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("toolbox definition: " + JsonErrorText(e));
  }
  SAGAD_RETURN_IF_ERROR(Validate(tb));
  return tb;
}

Status Validate(const ToolboxDefinition& tb) {
  if (!IsDefinitionName(tb.name))
    return InvalidArgument("toolbox name must be 1-64 of [A-Za-z0-9_-], got '" +
                           SanitizeUtf8(tb.name) + "'");
  if (tb.version < 1) return InvalidArgument("toolbox '" + tb.name + "': version must be >= 1");
  if (tb.tools.empty()) return InvalidArgument("toolbox '" + tb.name + "' has no tools");
  if (tb.on_idle != "review" && tb.on_idle != "abort")
    return InvalidArgument("toolbox '" + tb.name + "': on_idle must be \"review\" or \"abort\"");
  if (tb.max_calls < 1 || tb.max_calls > kMaxMaxCalls)
    return InvalidArgument("toolbox '" + tb.name + "': max_calls must be 1.." +
                           std::to_string(kMaxMaxCalls));
  if (tb.idle_timeout_s < 0)
    return InvalidArgument("toolbox '" + tb.name + "': idle_timeout_s must be >= 0");
  SAGAD_RETURN_IF_ERROR(
      ValidateSearchAttributes(tb.search_attributes, "toolbox '" + tb.name + "'", true));
  std::set<std::string> names;
  for (const auto& t : tb.tools) {
    SAGAD_RETURN_IF_ERROR(ValidateTool(t));
    if (!names.insert(t.name()).second)
      return InvalidArgument("toolbox '" + tb.name + "': duplicate tool '" + t.name() + "'");
  }
  // The guards again from their JSON: a builder's are checked as a file's.
  nlohmann::json gs = nlohmann::json::array();
  for (const auto& g : tb.guards) gs.push_back(g.ToJson());
  std::vector<Guard> checked;
  if (Status s = GuardsFromJson({{"guards", gs}}, tb.tools, &checked); !s.ok())
    return InvalidArgument("toolbox '" + tb.name + "': " + s.message());
  return Status::Ok();
}

const CallSpec* FirstUnconfiguredCall(const ToolboxDefinition& tb,
                                      const std::function<bool(const CallSpec&)>& configured,
                                      const ToolDefinition** tool) {
  for (const ToolDefinition& t : tb.tools) {
    *tool = &t;
    if (!configured(t.step.forward)) return &t.step.forward;
    if (t.step.compensation && !configured(*t.step.compensation)) return &*t.step.compensation;
  }
  return nullptr;
}

StatusOr<StepDefinition> CallStep(const ToolDefinition& tool, const std::string& call_id,
                                  const std::function<bool(const std::string&)>& earlier,
                                  const std::function<bool(const ApprovalRule&)>& holds) {
  StepDefinition st = tool.step;
  st.name = call_id;
  st.after = std::vector<std::string>{};
  RefMap map = [&](const std::string& e) -> StatusOr<std::string> {
    std::vector<std::string> p = SplitDots(e);
    std::string rest;
    for (size_t i = p[0] == "calls" ? 2 : 1; i < p.size(); ++i) rest += "." + p[i];
    if (p[0] == "args") return call_id + ".args" + rest;
    if (p[0] == "result") return call_id + ".result" + rest;
    if (p[0] == "calls") {
      if (!earlier(p[1]))
        return InvalidArgument("tool '" + tool.name() + "' refers to call '" + p[1] + "' ({{" + e +
                               "}}), which this run has not made");
      return p[1] + ".result" + rest;
    }
    return e;  // input.<field>
  };
  auto rewrite = [&](CallSpec* c) -> Status {
    auto path = RewriteRefs(c->path, map);
    if (!path.ok()) return path.status();
    auto body = RewriteRefs(c->body, map);
    if (!body.ok()) return body.status();
    c->path = std::move(*path);
    c->body = std::move(*body);
    return Status::Ok();
  };
  SAGAD_RETURN_IF_ERROR(rewrite(&st.forward));
  if (st.compensation) SAGAD_RETURN_IF_ERROR(rewrite(&*st.compensation));
  if (st.reconcile) SAGAD_RETURN_IF_ERROR(rewrite(&st.reconcile->read));
  st.requires_approval =
      st.irreversible || st.requires_approval || (st.approval_if && holds(*st.approval_if));
  st.approval_if.reset();
  return st;
}

SagaDefinitionPtr RunDefinition(const std::string& name, int version, int64_t idle_timeout_ms,
                                bool idle_abort) {
  auto def = std::make_shared<SagaDefinition>();
  def->name = name;
  def->version = version;
  def->run = true;
  def->max_parallel = 1;
  def->compensation_order = CompensationOrder::kReverseCompletion;
  def->idle_timeout_ms = idle_timeout_ms;
  def->idle_abort = idle_abort;
  return def;
}

}  // namespace sagad
