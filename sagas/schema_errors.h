// The words for what an input lacks against its schema, in one place: the
// API's 400/422 problem (its detail; the full list goes in "errors") and
// the engine's refusal of an input alike. Each error is "PATH MESSAGE",
// `whole` standing for the empty path (the value itself), "; " between
// them, at most `at_most` of them and "; ..." when there are more.
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include "sagas/json_schema.h"

namespace sagad {

std::string DescribeSchemaErrors(const std::vector<SchemaError>& errors, const std::string& whole,
                                 size_t at_most = 8);

}  // namespace sagad
