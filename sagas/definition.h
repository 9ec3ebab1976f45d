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

struct StepDefinition {
  std::string name;
  CallSpec forward;
  std::optional<CallSpec> compensation;
  bool irreversible = false;       // no undo; waits for operator approval
  bool requires_approval = false;  // implied by irreversible
  RetryPolicy retry;

  bool NeedsApproval() const { return irreversible || requires_approval; }
  bool operator==(const StepDefinition& o) const;
};

struct SagaDefinition {
  std::string name;
  int version = 1;
  std::vector<StepDefinition> steps;

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
// step, templates referring only to the input and to earlier steps.
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
  StepBuilder& Retry(RetryPolicy policy);
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
  StepBuilder& Step(std::string name);
  // Validates; InvalidArgument naming the offending step.
  StatusOr<SagaDefinition> Build();

 private:
  friend class StepBuilder;
  SagaDefinition def_;
  std::vector<std::unique_ptr<StepBuilder>> builders_;
};

}  // namespace sagad
