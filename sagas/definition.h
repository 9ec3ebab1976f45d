// SagaDefinition: what a saga is. Immutable once built; produced by the
// SagaBuilder DSL (C++) or FromJson (the same structure as JSON), both of
// which validate. Thread-safety: immutable after construction, share freely.
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

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "policies/retry_policy.h"
#include "sagas/status.h"

namespace sagad {

// One downstream call: service name (resolved through the config's service
// map), method, path template and body template (see sagas/template.h).
struct CallSpec {
  std::string service;
  std::string method = "POST";
  std::string path;
  nlohmann::json body;  // null: no body

  nlohmann::json ToJson() const;
  bool operator==(const CallSpec& o) const;
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
  bool irreversible = false;       // no undo; always waits for operator approval
  bool requires_approval = false;  // always wait for approval
  std::optional<ApprovalRule> approval_if;  // wait for approval when it holds
  int64_t approval_timeout_ms = 0;          // 0: wait forever
  std::string approval_timeout_action = "reject";  // or "escalate" (NEEDS_REVIEW)
  std::optional<RetryPolicy> retry;         // unset: the service's default
  std::optional<bool> idempotent;           // unset: the service's config
  std::optional<bool> queryable;            // unset: the service's config
  int64_t deadline_ms = 0;                  // 0: none; counted from the first send

  bool operator==(const StepDefinition& o) const;
};

struct SagaDefinition {
  std::string name;
  int version = 1;
  std::vector<StepDefinition> steps;
  int64_t deadline_ms = 0;  // 0: none; past it, a saga before its pivot compensates

  // Index of the step named `name`, or -1.
  int StepIndex(const std::string& name) const;
  // Input fields the templates refer to; a submission must provide them all.
  std::vector<std::string> RequiredInputFields() const;

  nlohmann::json ToJson() const;
  // Parses and validates; InvalidArgument with a one-line reason.
  static StatusOr<SagaDefinition> FromJson(const nlohmann::json& j);
  bool operator==(const SagaDefinition& o) const;
};

using SagaDefinitionPtr = std::shared_ptr<const SagaDefinition>;

// Checks a definition: names, unique steps, compensation on every reversible
// step, templates referring only to the input and to earlier steps, at most
// one irreversible step (the pivot), and every step after the pivot
// retriable (not declared both non-idempotent and non-queryable).
Status Validate(const SagaDefinition& def);

class SagaBuilder;

// Fluent step configuration; created by SagaBuilder::Step.
class StepBuilder {
 public:
  StepBuilder& Call(std::string service, std::string method, std::string path,
                    nlohmann::json body = nullptr);
  StepBuilder& Compensate(std::string service, std::string method,
                          std::string path, nlohmann::json body = nullptr);
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
  StepBuilder& Step(std::string name);
  // Validates; InvalidArgument naming the offending step.
  StatusOr<SagaDefinition> Build();

 private:
  friend class StepBuilder;
  SagaDefinition def_;
  std::vector<std::unique_ptr<StepBuilder>> builders_;
};

}  // namespace sagad
