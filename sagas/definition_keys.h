// The JSON keys of a saga definition, level by level: the one table the
// parser checks against (an unknown key is refused by name) and the
// reference in docs/defining-sagas.md is checked against (a test fails when
// the two differ).
// Thread-safety: immutable tables.
#pragma once

#include <vector>

namespace sagad {

struct DefinitionKeys {
  const char* level;              // as the docs' reference names it
  std::vector<const char*> keys;  // every key the parser takes there
};

// The saga, a step, a call (forward or compensation), a reconcile, an approval rule
// (approval_if), a retry policy.
const DefinitionKeys& SagaKeys();
const DefinitionKeys& StepKeys();
const DefinitionKeys& CallKeys();
const DefinitionKeys& ReconcileKeys();
const DefinitionKeys& ApprovalIfKeys();
const DefinitionKeys& RetryKeys();
// All of them, in that order.
std::vector<const DefinitionKeys*> AllDefinitionKeys();

}  // namespace sagad
