// The request one step's call makes for one instance: its path and body
// rendered from the instance's input and the results of its steps so far
// (sagas/template.h), and the hash the step's idempotency key is bound to
// (SHA-256 of "METHOD path\n" + the canonical body). An approval binds to the
// same hash: what an operator approved is what is sent.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sagas/definition.h"
#include "sagas/instance.h"
#include "util/status.h"

namespace sagad {

struct StepRequest {
  std::string path;
  nlohmann::json body;
  std::string hash;
};

// InvalidArgument if a template names something the instance lacks.
StatusOr<StepRequest> RenderStepRequest(const Instance& inst, const CallSpec& call);

}  // namespace sagad
