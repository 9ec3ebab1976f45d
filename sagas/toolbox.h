// ToolboxDefinition: the tools an agent may call in a run, decided at run
// time (docs/agents.md). Immutable once built; produced by ToolboxBuilder
// (C++) or FromJson (the same structure, "kind": "toolbox"), both of which
// validate. Thread-safety: immutable after construction, share freely.
//
// A tool is a step without a place in a graph: its forward call and its
// compensation (or `irreversible`), its approval rule on the arguments, its
// retry settings. Its templates may name
//   {{args.<field>...}}             an argument of the call
//   {{input.<field>...}}            the run's input
//   {{calls.<call_id>.<field>...}}  a field of an earlier call's result
//   {{result.<field>...}}           the call's own result (compensation only)
// A call becomes a step of its run named by its call_id (CallStep): the
// references are rewritten to the saga form of sagas/template.h, so the
// engine sends, approves, reconciles and undoes it as any other step.
//
//   auto tb = ToolboxBuilder("soc_tools", 1)
//       .Tool("block_ip", "Block an IP at the firewall",
//             {{"type", "object"}, {"required", {"ip"}},
//              {"properties", {{"ip", {{"type", "string"}}}}}})
//           .Call("firewall", "POST", "/rules", {{"block", "{{args.ip}}"}})
//           .Compensate("firewall", "DELETE", "/rules/{{result.rule_id}}")
//       .Build();   // StatusOr<ToolboxDefinition>
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sagas/definition.h"
#include "sagas/guards.h"
#include "sagas/json_schema.h"
#include "util/status.h"

namespace sagad {

constexpr int64_t kDefaultIdleTimeoutS = 3600;
constexpr int kDefaultMaxCalls = 100;
constexpr int kMaxMaxCalls = 256;  // a run's steps: the size of a saga's graph

struct ToolDefinition {
  // name, forward, compensation, irreversible, requires_approval,
  // approval_if (its field names an argument), approval timeout, retry,
  // idempotent, queryable, deadline_ms; never `after`.
  StepDefinition step;
  std::string description;
  nlohmann::json arguments_schema;  // a JSON Schema of the subset; null: any object
  std::shared_ptr<const InputSchema> schema;

  const std::string& name() const { return step.name; }
  // What is wrong with `arguments` (not an object, or the schema not met).
  std::vector<SchemaError> ArgumentErrors(const nlohmann::json& arguments) const;
  bool operator==(const ToolDefinition& o) const;
};

struct ToolboxDefinition {
  std::string name;
  int version = 1;
  std::string description;
  nlohmann::json input_schema;  // of a run's input; null: any object
  std::shared_ptr<const InputSchema> schema;
  int64_t idle_timeout_s = kDefaultIdleTimeoutS;  // 0: never idle
  std::string on_idle = "review";                 // or "abort"
  int max_calls = kDefaultMaxCalls;
  std::vector<ToolDefinition> tools;
  // The input fields and run metadata fields ("metadata.agent") runs are
  // searched by (sagas/search_attributes.h).
  std::vector<std::string> search_attributes;
  // Limits across calls (sagas/guards.h).
  std::vector<Guard> guards;

  const ToolDefinition* Tool(const std::string& name) const;
  std::vector<SchemaError> InputErrors(const nlohmann::json& input) const;
  nlohmann::json ToJson() const;
  // Parses and validates; InvalidArgument with a one-line reason naming the
  // key or the tool.
  static StatusOr<ToolboxDefinition> FromJson(const nlohmann::json& j);
  bool operator==(const ToolboxDefinition& o) const;
};

using ToolboxDefinitionPtr = std::shared_ptr<const ToolboxDefinition>;

// True when `j` is a toolbox's JSON ("kind": "toolbox"), not a saga's.
bool IsToolboxJson(const nlohmann::json& j);

// Names, tools (unique, each with a compensation or irreversible, never
// both), templates naming only what a call can see, approval rules naming
// declared arguments, schemas in the subset, settings in range.
Status Validate(const ToolboxDefinition& tb);

// The first call of a tool to a service `configured` does not know, and
// its tool in *tool; null when every service is known.
const CallSpec* FirstUnconfiguredCall(const ToolboxDefinition& tb,
                                      const std::function<bool(const CallSpec&)>& configured,
                                      const ToolDefinition** tool);

// A call_id: 1-64 of [A-Za-z0-9_-], and not "input" (a template root).
bool IsCallId(const std::string& id);

// The step a call of `tool` named `call_id` becomes: references rewritten
// ({{args.X}} -> {{<call_id>.args.X}}, {{calls.C.X}} -> {{C.result.X}},
// {{result.X}} -> {{<call_id>.result.X}}), no dependencies (a run orders
// its calls itself), and `requires_approval` set when the tool is
// irreversible, always asks, or `holds` says its rule holds for the call's
// arguments (the rule itself is then dropped). InvalidArgument when a
// {{calls.C...}} names no call in `earlier`.
StatusOr<StepDefinition> CallStep(const ToolDefinition& tool, const std::string& call_id,
                                  const std::function<bool(const std::string&)>& earlier,
                                  const std::function<bool(const ApprovalRule&)>& holds);

// The definition a run of toolbox `name` version `version` is driven by,
// built here only: the engine when it opens the run, and an instance when
// it replays the run's creation, get the same one. One call at a time,
// undone in the reverse order of completion; idle after `idle_timeout_ms`
// (0: never), then aborted when `idle_abort`, else finished.
SagaDefinitionPtr RunDefinition(const std::string& name, int version, int64_t idle_timeout_ms,
                                bool idle_abort);

class ToolboxBuilder;

// Fluent tool configuration; created by ToolboxBuilder::Tool.
class ToolBuilder {
 public:
  ToolBuilder& Call(std::string service, std::string method, std::string path,
                    nlohmann::json body = nullptr);
  ToolBuilder& Compensate(std::string service, std::string method, std::string path,
                          nlohmann::json body = nullptr);
  ToolBuilder& Irreversible();
  ToolBuilder& RequiresApproval();
  // Wait for approval when args.<field> <op> <value> holds.
  ToolBuilder& RequiresApprovalIf(std::string field, std::string op, nlohmann::json value);
  ToolBuilder& Retry(RetryPolicy policy);
  ToolBuilder& Tool(std::string name, std::string description,
                    nlohmann::json arguments_schema = nullptr);
  // The toolbox's guard (ToolboxBuilder::Guard), after the tools.
  ToolBuilder& Guard(nlohmann::json guard);
  StatusOr<ToolboxDefinition> Build();

 private:
  friend class ToolboxBuilder;
  ToolBuilder(ToolboxBuilder* parent, size_t index) : parent_(parent), index_(index) {}
  ToolDefinition& tool();
  ToolboxBuilder* parent_;
  size_t index_;
};

class ToolboxBuilder {
 public:
  ToolboxBuilder(std::string name, int version);
  ToolboxBuilder& Description(std::string text);
  ToolboxBuilder& InputSchema(nlohmann::json schema);
  // A run silent this long (0: never) goes to review, or is aborted when
  // `on_idle` is "abort".
  ToolboxBuilder& IdleTimeout(int64_t seconds, std::string on_idle = "review");
  ToolboxBuilder& MaxCalls(int n);
  ToolboxBuilder& SearchAttributes(std::vector<std::string> fields);
  // A guard as its JSON (sagas/guards.h), checked by Build.
  ToolboxBuilder& Guard(nlohmann::json guard);
  ToolBuilder& Tool(std::string name, std::string description,
                    nlohmann::json arguments_schema = nullptr);
  StatusOr<ToolboxDefinition> Build();

 private:
  friend class ToolBuilder;
  ToolboxDefinition tb_;
  nlohmann::json guards_ = nlohmann::json::array();
  std::vector<std::unique_ptr<ToolBuilder>> builders_;
};

}  // namespace sagad
