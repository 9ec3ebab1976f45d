// SagaDefinition and StepDefinition to JSON and back (the JSON form of
// docs/defining-sagas.md); the checks are in definition.cc.
#include <set>

#include "sagas/definition.h"
#include "sagas/definition_keys.h"
#include "sagas/search_attributes.h"
#include "util/json_limits.h"

namespace sagad {

nlohmann::json CallSpec::ToJson() const {
  if (IsMcp()) {
    nlohmann::json j = {{"mcp", service}, {"tool", path}};
    if (!body.is_null()) j["arguments"] = body;
    return j;
  }
  nlohmann::json j = {{"service", service}, {"method", method}, {"path", path}};
  if (!body.is_null()) j["body"] = body;
  return j;
}

nlohmann::json ReconcileSpec::ToJson() const {
  nlohmann::json j = read.ToJson();
  j.erase("mcp");
  j.erase("service");
  j["committed_if"] = committed_if;
  return j;
}

nlohmann::json ApprovalRule::ToJson() const {
  return {{"field", field}, {"op", op}, {"value", value}};
}

nlohmann::json StepToJson(const StepDefinition& st) {
  nlohmann::json j = {{"name", st.name}, {"forward", st.forward.ToJson()}};
  if (st.compensation) j["compensation"] = st.compensation->ToJson();
  if (st.reconcile) j["reconcile"] = st.reconcile->ToJson();
  j["irreversible"] = st.irreversible;
  j["requires_approval"] = st.requires_approval;
  if (st.approval_if) j["approval_if"] = st.approval_if->ToJson();
  if (st.approval_timeout_ms > 0) {
    j["approval_timeout_ms"] = st.approval_timeout_ms;
    j["approval_timeout_action"] = st.approval_timeout_action;
  }
  if (st.retry) j["retry"] = st.retry->ToJson();
  if (st.idempotent) j["idempotent"] = *st.idempotent;
  if (st.queryable) j["queryable"] = *st.queryable;
  if (st.deadline_ms > 0) j["deadline_ms"] = st.deadline_ms;
  if (st.after) j["after"] = *st.after;
  return j;
}

nlohmann::json SagaDefinition::ToJson() const {
  nlohmann::json js = nlohmann::json::array();
  for (const auto& st : steps) js.push_back(StepToJson(st));
  nlohmann::json out = {{"name", name}, {"version", version}, {"steps", js}};
  if (deadline_ms > 0) out["deadline_ms"] = deadline_ms;
  if (max_parallel != kDefaultMaxParallel) out["max_parallel"] = max_parallel;
  if (compensation_order != CompensationOrder::kReverseTopological)
    out["compensation_order"] = CompensationOrderName(compensation_order);
  if (!input.empty()) out["input"] = input;
  if (!input_schema.is_null()) out["input_schema"] = input_schema;
  if (!search_attributes.empty()) out["search_attributes"] = search_attributes;
  return out;
}

namespace {

// An HTTP call ({"service", "method", "path", "body"}) or a tool call on an
// MCP server ({"mcp", "tool", "arguments"}); never a mix of the two.
StatusOr<CallSpec> CallFromJson(const nlohmann::json& c, const std::string& where) {
  if (!c.is_object()) return InvalidArgument(where + " must be an object");
  SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(c, CallKeys().keys, where));
  CallSpec cs;
  if (c.contains("mcp")) {
    for (const char* http : {"service", "method", "path", "body"})
      if (c.contains(http))
        return InvalidArgument(where + ": \"" + http +
                               "\" is a key of an HTTP call; an MCP call has \"mcp\", \"tool\" "
                               "and \"arguments\"");
    cs.service = c.at("mcp").get<std::string>();
    cs.method = kMcpMethod;
    cs.path = c.at("tool").get<std::string>();
    cs.body = c.value("arguments", nlohmann::json::object());
    return cs;
  }
  for (const char* mcp : {"tool", "arguments"})
    if (c.contains(mcp))
      return InvalidArgument(where + ": \"" + mcp +
                             "\" is a key of an MCP call, which names its server in \"mcp\"");
  cs.service = c.at("service").get<std::string>();
  cs.method = c.value("method", std::string("POST"));
  if (cs.IsMcp())
    return InvalidArgument(where + ": unsupported method '" + cs.method +
                           "' (a tool call on an MCP server is {\"mcp\", \"tool\", "
                           "\"arguments\"})");
  cs.path = c.at("path").get<std::string>();
  cs.body = c.value("body", nlohmann::json());
  return cs;
}

// The forward's read: on the forward's own server or service.
StatusOr<ReconcileSpec> ReconcileFromJson(const nlohmann::json& r, const CallSpec& forward,
                                          const std::string& where) {
  if (!r.is_object()) return InvalidArgument(where + " must be an object");
  SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(r, ReconcileKeys().keys, where));
  ReconcileSpec rs;
  if (!r.contains("committed_if") || !r["committed_if"].is_string())
    return InvalidArgument(where +
                           ": committed_if (a JSON Pointer into the read's result that exists "
                           "only if the effect happened) is required");
  rs.committed_if = r["committed_if"].get<std::string>();
  nlohmann::json call = r;
  call.erase("committed_if");
  if (forward.IsMcp())
    call["mcp"] = forward.service;
  else
    call["service"] = forward.service;
  auto read = CallFromJson(call, where);
  if (!read.ok()) return read.status();
  rs.read = std::move(*read);
  return rs;
}

// Approval, retry, timeouts and dependencies of one step.
Status StepPoliciesFromJson(const nlohmann::json& js, const std::string& where,
                            StepDefinition* st) {
  st->irreversible = js.value("irreversible", false);
  st->requires_approval = js.value("requires_approval", false);
  if (js.contains("approval_if")) {
    const auto& a = js["approval_if"];
    SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(a, ApprovalIfKeys().keys, where + " approval_if"));
    st->approval_if = ApprovalRule{a.at("field").get<std::string>(), a.at("op").get<std::string>(),
                                   a.at("value")};
  }
  SAGAD_RETURN_IF_ERROR(
      IntField(js, "approval_timeout_ms", 0, kMaxDurationMs, where, &st->approval_timeout_ms));
  st->approval_timeout_action = js.value("approval_timeout_action", std::string("reject"));
  if (js.contains("retry")) {
    auto r = RetryPolicy::FromJson(js["retry"]);
    if (!r.ok()) return InvalidArgument(where + ": " + r.status().message());
    st->retry = *r;
  }
  if (js.contains("idempotent")) st->idempotent = js["idempotent"].get<bool>();
  if (js.contains("queryable")) st->queryable = js["queryable"].get<bool>();
  SAGAD_RETURN_IF_ERROR(IntField(js, "deadline_ms", 0, kMaxDurationMs, where, &st->deadline_ms));
  if (js.contains("after")) {
    if (!js["after"].is_array())
      return InvalidArgument(where + ": after must be an array of step names");
    st->after = js["after"].get<std::vector<std::string>>();
  }
  return Status::Ok();
}

// Everything but the steps.
Status SagaFieldsFromJson(const nlohmann::json& j, SagaDefinition* def) {
  SAGAD_RETURN_IF_ERROR(SearchAttributesFromJson(j, "saga definition", &def->search_attributes));
  if (j.contains("input")) {
    if (!j["input"].is_array()) return InvalidArgument("'input' must be an array of field names");
    def->input = j["input"].get<std::vector<std::string>>();
  }
  if (j.contains("input_schema")) {
    def->input_schema = j["input_schema"];
    auto compiled = sagad::InputSchema::Compile(def->input_schema);
    if (!compiled.ok()) return compiled.status();
    def->schema = std::make_shared<const sagad::InputSchema>(std::move(*compiled));
  }
  def->name = j.at("name").get<std::string>();
  // Integers are checked before they are converted (converting a float out
  // of range is undefined behaviour).
  const std::string where = "saga definition";
  SAGAD_RETURN_IF_ERROR(IntField(j, "version", 1, INT32_MAX, where, &def->version));
  SAGAD_RETURN_IF_ERROR(IntField(j, "deadline_ms", 0, kMaxDurationMs, where, &def->deadline_ms));
  SAGAD_RETURN_IF_ERROR(IntField(j, "max_parallel", 1, kMaxMaxParallel, where, &def->max_parallel));
  if (j.contains("compensation_order")) {
    std::string order = j["compensation_order"].get<std::string>();
    if (order == "reverse_topological")
      def->compensation_order = CompensationOrder::kReverseTopological;
    else if (order == "reverse_completion")
      def->compensation_order = CompensationOrder::kReverseCompletion;
    else
      return InvalidArgument(
          "compensation_order must be \"reverse_topological\" or "
          "\"reverse_completion\", got '" +
          SanitizeUtf8(order) + "'");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<StepDefinition> StepFromJson(const nlohmann::json& js) {
  if (!js.is_object()) return InvalidArgument("each step must be a JSON object");
  std::string where = "step '" + SanitizeUtf8(js.value("name", std::string("?"))) + "'";
  SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(js, StepKeys().keys, where));
  StepDefinition st;
  st.name = js.at("name").get<std::string>();
  auto forward = CallFromJson(js.at("forward"), where + " forward");
  if (!forward.ok()) return forward.status();
  st.forward = *forward;
  if (js.contains("compensation") && !js["compensation"].is_null()) {
    auto comp = CallFromJson(js["compensation"], where + " compensation");
    if (!comp.ok()) return comp.status();
    st.compensation = *comp;
  }
  if (js.contains("reconcile") && !js["reconcile"].is_null()) {
    auto rec = ReconcileFromJson(js["reconcile"], st.forward, where + " reconcile");
    if (!rec.ok()) return rec.status();
    st.reconcile = std::move(*rec);
  }
  SAGAD_RETURN_IF_ERROR(StepPoliciesFromJson(js, where, &st));
  return st;
}

StatusOr<SagaDefinition> SagaDefinition::FromJson(const nlohmann::json& j) {
  SagaDefinition def;
  try {
    if (!j.is_object()) return InvalidArgument("saga definition must be a JSON object");
    SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(j, SagaKeys().keys, "the saga definition"));
    if (!j.contains("steps"))
      return InvalidArgument("the saga definition has no \"steps\" (an array of steps)");
    SAGAD_RETURN_IF_ERROR(SagaFieldsFromJson(j, &def));
    if (!j.at("steps").is_array()) return InvalidArgument("'steps' must be an array");
    for (const auto& js : j.at("steps")) {
      auto st = StepFromJson(js);
      if (!st.ok()) return st.status();
      def.steps.push_back(std::move(*st));
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("saga definition: " + JsonErrorText(e));
  }
  SAGAD_RETURN_IF_ERROR(Validate(def));
  return def;
}

}  // namespace sagad
