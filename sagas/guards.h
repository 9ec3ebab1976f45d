// Guards: limits a toolbox puts on its calls across calls (docs/agents.md,
// "Guards"). A guard names a tool and counts its calls (`max_calls`) or sums
// one numeric argument over them (`sum` + `max`), per run or per principal
// (the token that opened the runs), optionally within a sliding window of
// `window_s` seconds. A call over a guard is refused (429 naming the guard),
// or, with `"then": "approval"`, waits for an operator.
//
// What is counted: every call of the tool that may have or may still take
// effect (the counted column of sagas/settled.h: never FAILED, REJECTED,
// CANCELLED or COMPENSATED). A call whose outcome is still unclear counts
// as done.
//
// This file is the pure part: parsing, validation, and the verdict on a
// list of counted calls. Gathering the calls (one run's, or every stored
// run of a principal) is the engine's (coordinator/engine/actions).
// Thread-safety: values; share freely.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/status.h"

namespace sagad {

struct ToolDefinition;

struct Guard {
  std::string name;  // default "<tool>.<max_calls|sum_FIELD>.<per>"
  std::string tool;
  int64_t max_calls = 0;  // 0: no count limit (then `sum` and `max`)
  std::string sum;        // an argument's name; empty: no sum
  double max = 0;
  std::string per = "run";  // or "principal"
  int64_t window_s = 0;     // 0: every stored call
  bool approval = false;    // "then": "approval" (else "refuse")

  nlohmann::json ToJson() const;
  bool per_principal() const { return per == "principal"; }
};

// One call as a guard sees it.
struct GuardedCall {
  std::string tool;
  nlohmann::json arguments;
  std::string status;  // the view's status name
  int64_t appended_at = 0;
};

// The toolbox's "guards" (absent: none); InvalidArgument naming the guard
// and the key. `tools`: the toolbox's tools (a guard names one of them; a
// summed argument must be declared by its schema when it has one).
Status GuardsFromJson(const nlohmann::json& toolbox, const std::vector<ToolDefinition>& tools,
                      std::vector<Guard>* out);

// Why a new call of `tool` with `arguments` at `now_ms` is over `g`, given
// the calls already made (`made`, any tools); empty when it is within. A
// summed argument that is not a number is InvalidArgument.
StatusOr<std::string> OverGuard(const Guard& g, const std::vector<GuardedCall>& made,
                                const std::string& tool, const nlohmann::json& arguments,
                                int64_t now_ms);

}  // namespace sagad
