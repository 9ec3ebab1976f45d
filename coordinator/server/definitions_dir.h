// Loading saga definitions from JSON files (sagad --definitions DIR).
#pragma once

#include <string>
#include <vector>

#include "sagas/definition.h"

namespace sagad {

// Parses and validates every *.json file in `dir` (sorted by name), each one
// saga definition. InvalidArgument naming the file on the first bad one.
StatusOr<std::vector<SagaDefinition>> LoadDefinitionsDir(const std::string& dir);

}  // namespace sagad
