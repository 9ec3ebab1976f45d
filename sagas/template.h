// Templates for paths and bodies of downstream calls.
//
// A template refers to values with {{expr}} where expr is one of
//   input.<field>[.<field>...]      a field of the saga's input
//   <step>.ref                      the external ref of an earlier step
//   <step>.result[.<field>...]      the result (or a field of it) of a step
// In a JSON body, a string that is exactly "{{expr}}" becomes the referenced
// JSON value (numbers stay numbers); other strings are interpolated. In a
// path, each value is interpolated and percent-encoded.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "util/status.h"

namespace sagad {

// What a template can see when it is rendered.
struct TemplateContext {
  const nlohmann::json* input = nullptr;
  // step name -> {"ref": ..., "result": ...}
  std::map<std::string, nlohmann::json> steps;
};

// The references a template makes: input fields (first segment) and steps.
struct TemplateRefs {
  std::set<std::string> input_fields;
  std::set<std::string> steps;
};

// Collects references; InvalidArgument on malformed {{...}}.
Status CollectRefs(const std::string& text, TemplateRefs* refs);
Status CollectRefs(const nlohmann::json& body, TemplateRefs* refs);

// Renders; InvalidArgument if a referenced value is missing. In a path each
// value is percent-encoded, and a segment that a value makes empty, "." or
// ".." is refused (the call would go to another path).
StatusOr<std::string> RenderPath(const std::string& path, const TemplateContext& ctx);
StatusOr<nlohmann::json> RenderBody(const nlohmann::json& body, const TemplateContext& ctx);

std::string PercentEncode(const std::string& s);

// Rewrites each {{expr}} of a text, or of the string values of a body (not
// its keys, which are never rendered), to {{map(expr)}}; `map` gets the
// expression trimmed and may refuse it. Used to turn a tool's references
// (sagas/toolbox.h) into the form above. InvalidArgument on an unterminated
// '{{' or whatever `map` refuses.
using RefMap = std::function<StatusOr<std::string>(const std::string& expr)>;
StatusOr<std::string> RewriteRefs(const std::string& text, const RefMap& map);
StatusOr<nlohmann::json> RewriteRefs(const nlohmann::json& body, const RefMap& map);

}  // namespace sagad
