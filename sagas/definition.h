// SagaDefinition: what a saga is. Immutable once built; produced by the
// SagaBuilder DSL (C++) or FromJson (the same structure as JSON), both of
// which validate. Thread-safety: immutable after construction, share freely.
//
// Steps form a graph: a step runs after the steps its After(...) names (JSON
// "after"); without it, after the step declared before it; After() with no
// names makes a root. Ready steps run concurrently, up to MaxParallel per
// instance (sagas/graph.h, policies/planner.h).
//
//   auto def = SagaBuilder("incident_response", 1)
//       .Step("create_ticket")
//           .Call("ticketing", "POST", "/tickets",
//                 {{"title", "{{input.title}}"}})
//           .Compensate("ticketing", "POST", "/tickets/{{create_ticket.ref}}/close")
//       .Step("notify_user")
//           .Call("mail", "POST", "/messages", {{"to", "{{input.email}}"}})
//           .Irreversible()
//       .Build();   // StatusOr<SagaDefinition>
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sagas/json_schema.h"
#include "sagas/retry_settings.h"
#include "util/status.h"

namespace sagad {

// The method of a call that is a tool call on an MCP server (JSON
// {"mcp": SERVER, "tool": TOOL, "arguments": {...}}, config "mcp_servers").
constexpr char kMcpMethod[] = "MCP";

// One downstream call: service name (resolved through the config's service
// map), method, path template and body template (see sagas/template.h).
// A tool call on an MCP server has method kMcpMethod: `service` names the
// server, `path` the tool and `body` its arguments (docs/agents.md).
struct CallSpec {
  std::string service;
  std::string method = "POST";
  std::string path;
  nlohmann::json body;  // null: no body

  bool IsMcp() const { return method == kMcpMethod; }
  nlohmann::json ToJson() const;
  bool operator==(const CallSpec& o) const;
};

// How to find out whether a forward call whose outcome is unclear took
// effect, for a downstream that has no operations endpoint to ask by key (an
// MCP server, a third-party REST API): a read on the same server or service
// (a tool call, or an HTTP request), answered 2xx / without error, whose
// result holds `committed_if` (a JSON Pointer) only if the effect happened.
// The read's result is then the step's result. JSON: {"tool", "arguments",
// "committed_if"} for an MCP forward, {"method", "path", "body",
// "committed_if"} for an HTTP one.
struct ReconcileSpec {
  CallSpec read;
  std::string committed_if;

  nlohmann::json ToJson() const;
  bool operator==(const ReconcileSpec& o) const {
    return read == o.read && committed_if == o.committed_if;
  }
};

// "Approval needed when input.<field> <op> <value>", e.g. amount > 1000.
// ops: == != > >= < <= (numbers compare numerically, strings as strings).
struct ApprovalRule {
  std::string field;
  std::string op;
  nlohmann::json value;

  nlohmann::json ToJson() const;
  bool operator==(const ApprovalRule& o) const {
    return field == o.field && op == o.op && value == o.value;
  }
};

struct StepDefinition {
  std::string name;
  CallSpec forward;
  std::optional<CallSpec> compensation;
  bool irreversible = false;                       // no undo; always waits for operator approval
  bool requires_approval = false;                  // always wait for approval
  std::optional<ApprovalRule> approval_if;         // wait for approval when it holds
  int64_t approval_timeout_ms = 0;                 // 0: wait forever
  std::string approval_timeout_action = "reject";  // or "escalate" (NEEDS_REVIEW)
  std::optional<RetryPolicy> retry;                // unset: the service's default
  std::optional<bool> idempotent;                  // unset: the service's config
  std::optional<bool> queryable;                   // unset: the service's config
  std::optional<ReconcileSpec> reconcile;          // the forward's read, where no key is asked
  int64_t deadline_ms = 0;                         // 0: none; counted from the first send
  // Steps that must commit first. Unset: the step declared before (none for
  // the first); empty: a root step.
  std::optional<std::vector<std::string>> after;
  // A run's call: the toolbox's tool it calls (the step's name is the
  // agent's call_id). Taken from the call's record, never from the step's
  // JSON; not part of equality. Empty for a saga's step.
  std::string tool;

  bool operator==(const StepDefinition& o) const;
};

// The order in which committed steps are undone.
enum class CompensationOrder {
  // A step is undone only once every committed step that depends on it
  // (directly or not) was undone; independent undos run concurrently.
  kReverseTopological,
  // One at a time, in the reverse of the order in which steps committed.
  kReverseCompletion,
};
const char* CompensationOrderName(CompensationOrder o);

constexpr int kDefaultMaxParallel = 8;
constexpr int kMaxMaxParallel = 64;

struct SagaDefinition {
  std::string name;
  int version = 1;
  std::vector<StepDefinition> steps;
  int64_t deadline_ms = 0;                 // 0: none; past it, a saga before its pivot compensates
  int max_parallel = kDefaultMaxParallel;  // steps in flight per instance, 1..64
  CompensationOrder compensation_order = CompensationOrder::kReverseTopological;
  // Declared input fields, each required (JSON "input": ["amount", ...]);
  // the fields the templates name are required too.
  std::vector<std::string> input;
  // A JSON Schema of the input (the subset of sagas/json_schema.h), checked
  // at submission; null: none. `schema` is its compiled form (set by the
  // builder and FromJson; compiled on use when a caller set input_schema).
  nlohmann::json input_schema;
  std::shared_ptr<const InputSchema> schema;
  // The input fields users search instances by (sagas/search_attributes.h):
  // a store indexes every instance of the saga by them.
  std::vector<std::string> search_attributes;
  // A run of a toolbox (sagas/toolbox.h): its steps are the calls appended
  // so far, one at a time, and a failed or rejected call does not turn it
  // back; only the agent ends it (finish, abort), or its silence past
  // idle_timeout_ms (to review, or aborted when idle_abort). Built by the
  // Instance from its log, never registered nor stored.
  bool run = false;
  int64_t idle_timeout_ms = 0;
  bool idle_abort = false;

  // Index of the step named `name`, or -1.
  int StepIndex(const std::string& name) const;
  // Names of the steps step i waits for (its `after`, or the one before it).
  std::vector<std::string> DependencyNames(size_t i) const;
  // Each step waits for exactly the one declared before it (a plain list):
  // one step at a time. Cheap (no allocation): asked on the hot path.
  bool IsChain() const;
  // Input fields the templates refer to, and those of `input`; a
  // submission must provide them all.
  std::vector<std::string> RequiredInputFields() const;
  // Every field the input declares: the required ones and the properties
  // of input_schema (an approval rule may only name one of these).
  std::set<std::string> DeclaredInputFields() const;
  // What is wrong with a submission's input (a required field missing, or
  // input_schema not met), each with its JSON Pointer; empty if nothing.
  std::vector<SchemaError> InputErrors(const nlohmann::json& input) const;

  nlohmann::json ToJson() const;
  // Parses and validates; InvalidArgument with a one-line reason.
  static StatusOr<SagaDefinition> FromJson(const nlohmann::json& j);
  bool operator==(const SagaDefinition& o) const;
};

using SagaDefinitionPtr = std::shared_ptr<const SagaDefinition>;

// Checks a definition: names, unique steps, compensation on every reversible
// step, a dependency graph without unknown or duplicate dependencies or
// cycles, templates referring only to the input and to ancestor steps (the
// step itself too in a compensation), at most one irreversible step (the
// pivot), the pivot a cut point of the graph (every other step its ancestor
// or its descendant: nothing runs beside it or its approval), and every step
// after the pivot retriable (not declared both non-idempotent and
// non-queryable), max_parallel in 1..64.
Status Validate(const SagaDefinition& def);

// The first call of `def` (each step's forward call, then its compensation,
// in step order) to a service `configured` does not know, and its step in
// *step; null when every service is known.
const CallSpec* FirstUnconfiguredCall(const SagaDefinition& def,
                                      const std::function<bool(const CallSpec&)>& configured,
                                      const StepDefinition** step);

// "service 'NAME'" or "MCP server 'NAME'": what a call calls, for messages.
std::string CalleeText(const CallSpec& call);

// 1-64 of [A-Za-z0-9_-]: a saga, step, tool, toolbox or service name.
bool IsDefinitionName(const std::string& s);
// A call's service name, method and literal path text (a tool's name for
// an MCP call); `where` starts the message (e.g. "step 'x' forward").
Status CheckCallShape(const CallSpec& call, const std::string& where);
// A step's reconcile against its forward: the same kind of call to the same
// server or service, a valid JSON Pointer.
Status CheckReconcileShape(const StepDefinition& st, const std::string& where);
// One step as JSON (the form SagaDefinition::ToJson lists), and back: only
// the keys of a step (sagas/definition_keys.h) are taken. StepFromJson may
// throw nlohmann::json::exception on a value of the wrong type.
nlohmann::json StepToJson(const StepDefinition& st);
StatusOr<StepDefinition> StepFromJson(const nlohmann::json& js);

class SagaBuilder;

// Fluent step configuration; created by SagaBuilder::Step.
class StepBuilder {
 public:
  StepBuilder& Call(std::string service, std::string method, std::string path,
                    nlohmann::json body = nullptr);
  StepBuilder& Compensate(std::string service, std::string method, std::string path,
                          nlohmann::json body = nullptr);
  StepBuilder& Irreversible();
  StepBuilder& RequiresApproval();
  // Wait for approval when input.<field> <op> <value> holds.
  StepBuilder& RequiresApprovalIf(std::string field, std::string op, nlohmann::json value);
  // After `ms` awaiting approval: "reject" (compensate) or "escalate".
  StepBuilder& ApprovalTimeout(int64_t ms, std::string action = "reject");
  StepBuilder& Retry(RetryPolicy policy);
  // Override the service's declaration for this step.
  StepBuilder& Idempotent(bool on);
  StepBuilder& Queryable(bool on);
  // Give up retrying `ms` after the first send.
  StepBuilder& Deadline(int64_t ms);
  // Run after the named steps (no names: a root step, runs at once).
  template <typename... Names>
  StepBuilder& After(const Names&... names) {
    return AfterSteps(std::vector<std::string>{std::string(names)...});
  }
  StepBuilder& AfterSteps(std::vector<std::string> names);
  // Continue with the next step / finish the saga.
  StepBuilder& Step(std::string name);
  StatusOr<SagaDefinition> Build();

 private:
  friend class SagaBuilder;
  StepBuilder(SagaBuilder* parent, size_t index) : parent_(parent), index_(index) {}
  StepDefinition& step();
  SagaBuilder* parent_;
  size_t index_;
};

class SagaBuilder {
 public:
  SagaBuilder(std::string name, int version);
  // Past `ms` after creation, a saga that has not passed its pivot compensates.
  SagaBuilder& Deadline(int64_t ms);
  // At most `n` steps of one instance in flight at once (default 8).
  SagaBuilder& MaxParallel(int n);
  // The input fields instances are searched by (an index each).
  SagaBuilder& SearchAttributes(std::vector<std::string> fields);
  // The order committed steps are undone in (default reverse_topological).
  SagaBuilder& CompensationOrder(sagad::CompensationOrder order);
  // Declares required input fields (besides those the templates name).
  SagaBuilder& Input(std::vector<std::string> fields);
  // A JSON Schema the input must meet (sagas/json_schema.h's subset).
  SagaBuilder& InputSchema(nlohmann::json schema);
  StepBuilder& Step(std::string name);
  // Validates; InvalidArgument naming the offending step.
  StatusOr<SagaDefinition> Build();

 private:
  friend class StepBuilder;
  SagaDefinition def_;
  std::vector<std::unique_ptr<StepBuilder>> builders_;
};

}  // namespace sagad
