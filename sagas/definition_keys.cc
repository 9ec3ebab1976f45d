#include "sagas/definition_keys.h"

namespace sagad {

const DefinitionKeys& SagaKeys() {
  static const DefinitionKeys k{
      "saga",
      {"name", "version", "steps", "deadline_ms", "max_parallel", "compensation_order", "input",
       "input_schema", "search_attributes"}};
  return k;
}

const DefinitionKeys& StepKeys() {
  static const DefinitionKeys k{
      "step",
      {"name", "forward", "compensation", "irreversible", "requires_approval", "approval_if",
       "approval_timeout_ms", "approval_timeout_action", "retry", "idempotent", "queryable",
       "deadline_ms", "after", "reconcile"}};
  return k;
}

const DefinitionKeys& CallKeys() {
  static const DefinitionKeys k{"call",
                                {"service", "method", "path", "body", "mcp", "tool", "arguments"}};
  return k;
}

const DefinitionKeys& ReconcileKeys() {
  static const DefinitionKeys k{"reconcile",
                                {"tool", "arguments", "method", "path", "body", "committed_if"}};
  return k;
}

const DefinitionKeys& ApprovalIfKeys() {
  static const DefinitionKeys k{"approval_if", {"field", "op", "value"}};
  return k;
}

const DefinitionKeys& RetryKeys() {
  static const DefinitionKeys k{"retry",
                                {"max_attempts", "initial_backoff_ms", "max_backoff_ms",
                                 "multiplier", "max_reconciliations"}};
  return k;
}

std::vector<const DefinitionKeys*> AllDefinitionKeys() {
  return {&SagaKeys(), &StepKeys(), &CallKeys(), &ReconcileKeys(), &ApprovalIfKeys(), &RetryKeys()};
}

}  // namespace sagad
