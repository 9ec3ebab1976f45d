// InputSchema: the JSON Schema (2020-12) subset a saga's "input_schema"
// may use, checked against every submission's input. No I/O.
//
// Keywords: type, properties, required, additionalProperties, enum, const,
// minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength,
// maxLength, pattern, items, minItems, maxItems; the annotations $schema,
// $id, $comment, title, description, default, examples and deprecated are
// accepted and have no effect. Schemas may be booleans (true, false). Any
// other keyword is refused when the schema is compiled, naming it: a schema
// that says more than sagad checks would let through what its author meant
// to refuse. Lengths count code points; "pattern" is an ECMAScript regular
// expression (std::regex, at most 512 characters), searched anywhere in the
// string; a string over 1,024 bytes is refused where a pattern applies
// (std::regex matches by recursion). A pattern that backtracks
// exponentially is its author's to avoid.
// Thread-safety: a compiled schema is immutable; Check may run concurrently.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/status.h"

namespace sagad {

struct SchemaError {
  std::string path;     // JSON Pointer of the offending value ("" = the whole input)
  std::string message;  // what the schema wanted there
};

class InputSchema {
 public:
  // InvalidArgument naming the keyword (and where it is) that is not in the
  // subset, or a value of the wrong kind for its keyword.
  static StatusOr<InputSchema> Compile(const nlohmann::json& schema);

  // Every violation of `value`, in document order (empty: it conforms).
  std::vector<SchemaError> Check(const nlohmann::json& value) const;

  const nlohmann::json& source() const { return source_; }

  struct Node;  // a compiled schema (opaque; json_schema.cc)

 private:
  InputSchema() = default;
  nlohmann::json source_;
  std::shared_ptr<const Node> root_;
};

}  // namespace sagad
