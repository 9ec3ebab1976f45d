// Approval policy: which steps wait for an operator, and when a wait is over.
// Pure functions of the definition, the input and the time.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "sagas/definition.h"

namespace sagad {

// True if `rule` holds for `input` (a missing field never holds).
bool EvaluateApprovalRule(const ApprovalRule& rule, const nlohmann::json& input);

// Irreversible steps always need approval; others when declared so, or when
// their approval rule holds for this input.
bool NeedsApproval(const StepDefinition& step, const nlohmann::json& input);

// When an approval requested at `requested_at_ms` times out (0: never).
int64_t ApprovalDeadline(const StepDefinition& step, int64_t requested_at_ms);

}  // namespace sagad
