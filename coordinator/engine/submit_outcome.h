// What a submission answers: the instance it created, or the one an earlier
// request with the same Idempotency-Key created (and what that request was
// answered). Part of the engine's public interface (engine.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sagad {

struct SubmitOutcome {
  std::string instance_id;
  bool replayed = false;  // an earlier submission with the same key
  int stored_status = 0;  // replay: the status first returned (0: none)
  nlohmann::json stored_response;
};

}  // namespace sagad
