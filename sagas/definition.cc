#include "sagas/definition.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <set>

#include "sagas/definition_keys.h"
#include "sagas/graph.h"
#include "sagas/search_attributes.h"
#include "sagas/template.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

// The size of a saga's graph (docs/defining-sagas.md).
constexpr size_t kMaxSteps = 256;
constexpr size_t kMaxEdges = 4096;

bool IsName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-'; });
}

// `graph` null: only the input fields are collected.
Status ValidateCall(const SagaDefinition& def, const StepGraph* graph, size_t index,
                    const CallSpec& call, const char* what, bool self_visible,
                    std::set<std::string>* input_fields) {
  const std::string& step = def.steps[index].name;
  std::string where = "step '" + step + "' " + what;
  SAGAD_RETURN_IF_ERROR(CheckCallShape(call, where));
  TemplateRefs refs;
  Status s = CollectRefs(call.path, &refs);
  if (s.ok()) s = CollectRefs(call.body, &refs);
  if (!s.ok()) return InvalidArgument(where + ": " + s.message());
  for (const auto& ref : refs.steps) {
    int i = def.StepIndex(ref);
    if (i < 0) return InvalidArgument(where + " refers to unknown step '" + ref + "'");
    if (!graph) continue;
    bool visible = static_cast<size_t>(i) == index ? self_visible
                                                   : graph->IsAncestor(i, static_cast<int>(index));
    if (!visible)
      return InvalidArgument(where + " refers to step '" + ref +
                             "', which has not run yet at that point (it is not among the "
                             "steps '" +
                             step + "' comes after, directly or not)");
  }
  if (input_fields) input_fields->insert(refs.input_fields.begin(), refs.input_fields.end());
  return Status::Ok();
}

}  // namespace

bool IsDefinitionName(const std::string& s) { return IsName(s); }

std::string CalleeText(const CallSpec& call) {
  return (call.IsMcp() ? "MCP server '" : "service '") + call.service + "'";
}

Status CheckCallShape(const CallSpec& call, const std::string& where) {
  if (call.IsMcp()) {
    if (!IsName(call.service))
      return InvalidArgument(where + ": MCP server name missing or invalid");
    if (!IsName(call.path))
      return InvalidArgument(where + ": tool name must be 1-64 of [A-Za-z0-9_-]");
    if (!call.body.is_object()) return InvalidArgument(where + ": arguments must be an object");
    return Status::Ok();
  }
  if (!IsName(call.service)) return InvalidArgument(where + ": service name missing or invalid");
  static const std::set<std::string> kMethods = {"POST", "PUT", "PATCH", "DELETE", "GET"};
  if (!kMethods.count(call.method))
    return InvalidArgument(where + ": unsupported method '" + call.method + "'");
  if (call.path.empty() || call.path[0] != '/')
    return InvalidArgument(where + ": path must start with '/'");
  // The literal text is written to the request line as it is: a CR, LF,
  // space or other control byte would end the line (and start a second
  // request, without a key); non-ASCII is not a path. Values put in by
  // templates are percent-encoded, so only the literal text is checked.
  for (unsigned char c : call.path)
    if (c <= 0x20 || c >= 0x7F || c == '"' || c == '<' || c == '>' || c == '\\' || c == '^' ||
        c == '`' || c == '|')
      return InvalidArgument(where + ": path holds a character a request line cannot carry (" +
                             (c < 0x20 || c == 0x7F ? "control byte " + std::to_string(c)
                              : c == ' '            ? std::string("space")
                              : c >= 0x80           ? std::string("non-ASCII byte")
                                                    : std::string("'") + char(c) + "'") +
                             "); percent-encode it");
  return Status::Ok();
}

Status CheckReconcileShape(const StepDefinition& st, const std::string& where) {
  if (!st.reconcile) return Status::Ok();
  const ReconcileSpec& r = *st.reconcile;
  if (r.read.service != st.forward.service || r.read.IsMcp() != st.forward.IsMcp())
    return InvalidArgument(where + ": reconcile must read from the forward's own " +
                           (st.forward.IsMcp() ? "MCP server" : "service"));
  SAGAD_RETURN_IF_ERROR(CheckCallShape(r.read, where + " reconcile"));
  try {
    (void)nlohmann::json::json_pointer(r.committed_if);
  } catch (const nlohmann::json::exception&) {
    return InvalidArgument(where + " reconcile: committed_if '" + SanitizeUtf8(r.committed_if) +
                           "' is not a JSON Pointer (e.g. \"/entities/0\")");
  }
  if (r.committed_if.empty())
    return InvalidArgument(where +
                           " reconcile: committed_if must point into the result (\"\" is the "
                           "whole result, which every answer has)");
  return Status::Ok();
}

bool CallSpec::operator==(const CallSpec& o) const {
  return service == o.service && method == o.method && path == o.path && body == o.body;
}

const char* CompensationOrderName(CompensationOrder o) {
  return o == CompensationOrder::kReverseCompletion ? "reverse_completion" : "reverse_topological";
}

bool StepDefinition::operator==(const StepDefinition& o) const {
  return after == o.after && name == o.name && forward == o.forward &&
         compensation == o.compensation && irreversible == o.irreversible &&
         requires_approval == o.requires_approval && approval_if == o.approval_if &&
         approval_timeout_ms == o.approval_timeout_ms &&
         approval_timeout_action == o.approval_timeout_action && retry == o.retry &&
         idempotent == o.idempotent && queryable == o.queryable && reconcile == o.reconcile &&
         deadline_ms == o.deadline_ms;
}

bool SagaDefinition::operator==(const SagaDefinition& o) const {
  return name == o.name && version == o.version && steps == o.steps &&
         deadline_ms == o.deadline_ms && max_parallel == o.max_parallel &&
         compensation_order == o.compensation_order && input == o.input &&
         input_schema == o.input_schema && search_attributes == o.search_attributes;
}

int SagaDefinition::StepIndex(const std::string& step) const {
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].name == step) return static_cast<int>(i);
  return -1;
}

std::vector<std::string> SagaDefinition::DependencyNames(size_t i) const {
  if (steps[i].after) return *steps[i].after;
  if (i == 0) return {};
  return {steps[i - 1].name};
}

bool SagaDefinition::IsChain() const {
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& after = steps[i].after;
    if (!after) continue;  // the step before, or none for the first
    if (i == 0 ? !after->empty() : after->size() != 1 || (*after)[0] != steps[i - 1].name)
      return false;
  }
  return true;
}

std::vector<std::string> SagaDefinition::RequiredInputFields() const {
  std::set<std::string> fields;
  for (size_t i = 0; i < steps.size(); ++i) {
    (void)ValidateCall(*this, nullptr, i, steps[i].forward, "forward", false, &fields);
    if (steps[i].compensation)
      (void)ValidateCall(*this, nullptr, i, *steps[i].compensation, "compensation", true, &fields);
    if (steps[i].reconcile)
      (void)ValidateCall(*this, nullptr, i, steps[i].reconcile->read, "reconcile", false, &fields);
  }
  fields.insert(input.begin(), input.end());
  return {fields.begin(), fields.end()};
}

std::set<std::string> SagaDefinition::DeclaredInputFields() const {
  std::vector<std::string> required = RequiredInputFields();
  std::set<std::string> out(required.begin(), required.end());
  if (input_schema.is_object() && input_schema.contains("properties") &&
      input_schema["properties"].is_object())
    for (const auto& item : input_schema["properties"].items()) out.insert(item.key());
  return out;
}

std::vector<SchemaError> SagaDefinition::InputErrors(const nlohmann::json& in) const {
  std::vector<SchemaError> errors;
  if (!in.is_object()) return {{"", "input must be a JSON object"}};
  for (const auto& f : RequiredInputFields())
    if (!in.contains(f) || in[f].is_null()) errors.push_back({"/" + f, "is required"});
  if (input_schema.is_null()) return errors;
  std::shared_ptr<const sagad::InputSchema> compiled = schema;
  if (!compiled) {
    auto c = sagad::InputSchema::Compile(input_schema);
    if (!c.ok()) return {{"", c.status().message()}};
    compiled = std::make_shared<const sagad::InputSchema>(std::move(*c));
  }
  for (auto& e : compiled->Check(in)) {
    bool repeated = false;
    for (const auto& have : errors) repeated = repeated || have.path == e.path;
    if (!repeated) errors.push_back(std::move(e));
  }
  return errors;
}

namespace {

// An approval rule names a field the input declares (a misspelt field would
// silently never hold, and the step would go without approval), and is not
// put on an irreversible step (which always waits for an operator).
Status ValidateApprovalRule(const SagaDefinition& def, const StepDefinition& st,
                            const std::set<std::string>& declared) {
  if (!st.approval_if) return Status::Ok();
  static const std::set<std::string> kOps = {"==", "!=", ">", ">=", "<", "<="};
  if (st.approval_if->field.empty() || !kOps.count(st.approval_if->op))
    return InvalidArgument("step '" + st.name +
                           "': approval rule needs a field and one of == != > >= < <=");
  if (st.irreversible)
    return InvalidArgument("step '" + st.name +
                           "': an approval rule on an irreversible step has no effect "
                           "(irreversible steps always wait for an operator); remove it");
  if (!declared.count(st.approval_if->field)) {
    std::string list;
    for (const auto& f : declared) list += (list.empty() ? "" : ", ") + f;
    return InvalidArgument("step '" + st.name + "': approval rule field '" +
                           SanitizeUtf8(st.approval_if->field) + "' is not a field saga '" +
                           def.name +
                           "' declares in its input (declared: " + (list.empty() ? "none" : list) +
                           "; declare it in \"input\" or \"input_schema\")");
  }
  return Status::Ok();
}

}  // namespace

namespace {

Status ValidateNames(const SagaDefinition& def) {
  if (!IsName(def.name))
    return InvalidArgument("saga name must be 1-64 of [A-Za-z0-9_-], got '" + def.name + "'");
  if (def.version < 1) return InvalidArgument("saga '" + def.name + "': version must be >= 1");
  if (def.steps.empty()) return InvalidArgument("saga '" + def.name + "' has no steps");
  // Views and plans walk the graph: its size is bounded at registration.
  if (def.steps.size() > kMaxSteps)
    return InvalidArgument("saga '" + def.name + "' has " + std::to_string(def.steps.size()) +
                           " steps; at most " + std::to_string(kMaxSteps) + " are allowed");
  size_t edges = 0;
  for (const StepDefinition& st : def.steps) edges += st.after ? st.after->size() : 0;
  if (edges > kMaxEdges)
    return InvalidArgument("saga '" + def.name + "' has " + std::to_string(edges) +
                           " dependencies (\"after\" entries); at most " +
                           std::to_string(kMaxEdges) + " are allowed");
  std::set<std::string> names;
  for (size_t i = 0; i < def.steps.size(); ++i) {
    const StepDefinition& st = def.steps[i];
    if (!IsName(st.name))
      return InvalidArgument("step name must be 1-64 of [A-Za-z0-9_-], got '" + st.name + "'");
    if (!names.insert(st.name).second)
      return InvalidArgument("duplicate step name '" + st.name + "'");
  }
  if (def.max_parallel < 1 || def.max_parallel > kMaxMaxParallel)
    return InvalidArgument("saga '" + def.name + "': max_parallel must be 1.." +
                           std::to_string(kMaxMaxParallel) + ", got " +
                           std::to_string(def.max_parallel));
  return Status::Ok();
}

// Step i: its calls, its undo (none only for the pivot and what follows it),
// its approval rule, retry and timeouts.
Status ValidateStep(const SagaDefinition& def, StepGraph* graph, size_t i, int first_pivot,
                    const std::set<std::string>& declared) {
  const StepDefinition& st = def.steps[i];
  SAGAD_RETURN_IF_ERROR(ValidateCall(def, graph, i, st.forward, "forward", false, nullptr));
  SAGAD_RETURN_IF_ERROR(CheckReconcileShape(st, "step '" + st.name + "'"));
  if (st.reconcile)
    SAGAD_RETURN_IF_ERROR(
        ValidateCall(def, graph, i, st.reconcile->read, "reconcile", false, nullptr));
  // After the pivot a saga only goes forward: those steps need no undo.
  bool after_pivot = first_pivot >= 0 && graph->IsAncestor(first_pivot, static_cast<int>(i));
  if (!st.irreversible && !st.compensation && !after_pivot)
    return InvalidArgument("step '" + st.name +
                           "' is reversible but has no compensation "
                           "(add Compensate(...) or mark it Irreversible())");
  SAGAD_RETURN_IF_ERROR(ValidateApprovalRule(def, st, declared));
  if (st.irreversible && st.compensation)
    return InvalidArgument("step '" + st.name + "' is irreversible but declares a compensation");
  if (st.compensation)
    SAGAD_RETURN_IF_ERROR(
        ValidateCall(def, graph, i, *st.compensation, "compensation", true, nullptr));
  if (st.retry) {
    Status rs = RetryPolicy::FromJson(st.retry->ToJson()).status();
    if (!rs.ok()) return InvalidArgument("step '" + st.name + "': " + rs.message());
  }
  if (st.approval_timeout_ms < 0 || st.deadline_ms < 0)
    return InvalidArgument("step '" + st.name + "': timeouts must be >= 0");
  if (st.approval_timeout_action != "reject" && st.approval_timeout_action != "escalate")
    return InvalidArgument("step '" + st.name +
                           "': approval timeout action must be \"reject\" or \"escalate\"");
  return Status::Ok();
}

// Pivot rule: once the irreversible step committed nothing can be undone, so
// the saga can only go forward: no second pivot, nothing running beside it
// (a sibling that fails after the pivot committed could not be turned back),
// and every later step must be safe to retry (idempotent or queryable).
Status ValidatePivot(const SagaDefinition& def, const StepGraph& graph) {
  int pivot = -1;
  for (size_t i = 0; i < def.steps.size(); ++i) {
    const StepDefinition& st = def.steps[i];
    if (!st.irreversible) continue;
    if (pivot >= 0) {
      bool later = graph.IsAncestor(pivot, static_cast<int>(i));
      return InvalidArgument("step '" + st.name + "' is a second irreversible step " +
                             (later ? "after" : "beside") + " the pivot '" + def.steps[pivot].name +
                             "'; a saga has at most one pivot");
    }
    pivot = static_cast<int>(i);
  }
  if (pivot < 0) return Status::Ok();
  for (size_t i = 0; i < def.steps.size(); ++i) {
    const StepDefinition& st = def.steps[i];
    int k = static_cast<int>(i);
    if (k == pivot) continue;
    if (!graph.IsAncestor(k, pivot) && !graph.IsAncestor(pivot, k))
      return InvalidArgument("step '" + st.name + "' may run beside the irreversible step '" +
                             def.steps[pivot].name +
                             "': the pivot must come after or before every other step "
                             "(add one to the other's after)");
    if (graph.IsAncestor(pivot, k) && st.idempotent == false && st.queryable == false)
      return InvalidArgument("step '" + st.name + "' comes after the pivot '" +
                             def.steps[pivot].name +
                             "' but is neither idempotent nor queryable, so it cannot be "
                             "retried safely (forward recovery needs retriable steps)");
  }
  return Status::Ok();
}

}  // namespace

Status Validate(const SagaDefinition& def) {
  SAGAD_RETURN_IF_ERROR(ValidateNames(def));
  SAGAD_RETURN_IF_ERROR(
      ValidateSearchAttributes(def.search_attributes, "saga '" + def.name + "'", def.run));
  auto graph = StepGraph::Of(def);
  if (!graph.ok()) return InvalidArgument("saga '" + def.name + "': " + graph.status().message());
  if (!def.input_schema.is_null()) {
    auto compiled = sagad::InputSchema::Compile(def.input_schema);
    if (!compiled.ok())
      return InvalidArgument("saga '" + def.name + "': " + compiled.status().message());
  }
  for (const auto& f : def.input)
    if (f.empty()) return InvalidArgument("saga '" + def.name + "': an input field name is empty");
  int first_pivot = -1;
  for (size_t i = 0; i < def.steps.size() && first_pivot < 0; ++i)
    if (def.steps[i].irreversible) first_pivot = static_cast<int>(i);
  const std::set<std::string> declared = def.DeclaredInputFields();
  for (size_t i = 0; i < def.steps.size(); ++i)
    SAGAD_RETURN_IF_ERROR(ValidateStep(def, &*graph, i, first_pivot, declared));
  if (def.deadline_ms < 0) return InvalidArgument("saga deadline must be >= 0");
  return ValidatePivot(def, *graph);
}

const CallSpec* FirstUnconfiguredCall(const SagaDefinition& def,
                                      const std::function<bool(const CallSpec&)>& configured,
                                      const StepDefinition** step) {
  for (const StepDefinition& st : def.steps) {
    *step = &st;
    if (!configured(st.forward)) return &st.forward;
    if (st.compensation && !configured(*st.compensation)) return &*st.compensation;
  }
  return nullptr;
}

}  // namespace sagad
