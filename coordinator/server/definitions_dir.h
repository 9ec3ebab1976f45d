// Loading saga and toolbox definitions from JSON files (sagad --definitions DIR).
#pragma once

#include <string>
#include <vector>

#include "sagas/definition.h"
#include "sagas/toolbox.h"

namespace sagad {

// Parses and validates every *.json file in `dir` (sorted by name), each one
// saga definition, or one toolbox ("kind": "toolbox"), which goes to
// *toolboxes (a toolbox file is refused when it is null). InvalidArgument
// naming the file on the first bad one.
StatusOr<std::vector<SagaDefinition>> LoadDefinitionsDir(
    const std::string& dir, std::vector<ToolboxDefinition>* toolboxes = nullptr);

}  // namespace sagad
