#include "policies/approval_policy.h"

namespace sagad {

bool EvaluateApprovalRule(const ApprovalRule& rule, const nlohmann::json& input) {
  if (!input.is_object() || !input.contains(rule.field)) return false;
  const nlohmann::json& v = input[rule.field];
  int cmp;
  if (v.is_number() && rule.value.is_number()) {
    double a = v.get<double>(), b = rule.value.get<double>();
    cmp = a < b ? -1 : (a > b ? 1 : 0);
  } else if (v.is_string() && rule.value.is_string()) {
    cmp = v.get<std::string>().compare(rule.value.get<std::string>());
    cmp = cmp < 0 ? -1 : (cmp > 0 ? 1 : 0);
  } else {
    if (rule.op == "==") return v == rule.value;
    if (rule.op == "!=") return v != rule.value;
    return false;  // ordering between different types never holds
  }
  if (rule.op == "==") return cmp == 0;
  if (rule.op == "!=") return cmp != 0;
  if (rule.op == ">") return cmp > 0;
  if (rule.op == ">=") return cmp >= 0;
  if (rule.op == "<") return cmp < 0;
  if (rule.op == "<=") return cmp <= 0;
  return false;
}

bool NeedsApproval(const StepDefinition& step, const nlohmann::json& input) {
  if (step.irreversible || step.requires_approval) return true;
  return step.approval_if && EvaluateApprovalRule(*step.approval_if, input);
}

int64_t ApprovalDeadline(const StepDefinition& step, int64_t requested_at_ms) {
  return step.approval_timeout_ms > 0 ? requested_at_ms + step.approval_timeout_ms : 0;
}

}  // namespace sagad
