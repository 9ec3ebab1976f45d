#include "sagas/json_schema.h"

#include <re2/re2.h>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "sagas/schema_errors.h"
#include "util/json_limits.h"

namespace sagad {

struct InputSchema::Node {
  std::optional<bool> boolean;  // a boolean schema: true accepts, false refuses all
  std::vector<std::string> types;
  std::vector<std::pair<std::string, std::shared_ptr<const Node>>> properties;
  std::vector<std::string> required;
  std::shared_ptr<const Node> additional;  // null: absent (anything goes)
  std::optional<nlohmann::json> enum_values, const_value;
  std::optional<double> minimum, maximum, exclusive_minimum, exclusive_maximum;
  std::optional<int64_t> min_length, max_length, min_items, max_items;
  std::shared_ptr<const re2::RE2> pattern;
  std::string pattern_source;
  std::shared_ptr<const Node> items;
};

namespace {

// A pattern is written by whoever deploys the saga; the subject comes from
// any submitter. RE2 matches in time linear in the subject whatever the
// pattern (no backtracking: `^(a+)+$` costs what `^a+$` does), and refuses
// at registration what needs backtracking (backreferences, lookaround).
// Both lengths stay bounded: the pattern's compiled size, the subject's work.
constexpr size_t kMaxPatternLength = 512;
constexpr size_t kMaxPatternSubject = 1024;

using Node = InputSchema::Node;
using NodePtr = std::shared_ptr<const Node>;

const std::set<std::string>& Annotations() {
  static const std::set<std::string> k = {"$schema",     "$id",     "$comment", "title",
                                          "description", "default", "examples", "deprecated"};
  return k;
}

std::string Token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

Status Bad(const std::string& at, const std::string& what) {
  return InvalidArgument("input_schema" + (at.empty() ? std::string() : " at " + at) + ": " + what);
}

Status Count(const nlohmann::json& s, const char* key, const std::string& at,
             std::optional<int64_t>* out) {
  auto it = s.find(key);
  if (it == s.end()) return Status::Ok();
  int64_t v = 0;
  if (!AsInt64(*it, &v) || v < 0)
    return Bad(at, std::string(key) + " must be a non-negative integer");
  *out = v;
  return Status::Ok();
}

Status Bound(const nlohmann::json& s, const char* key, const std::string& at,
             std::optional<double>* out) {
  auto it = s.find(key);
  if (it == s.end()) return Status::Ok();
  if (!it->is_number()) return Bad(at, std::string(key) + " must be a number");
  *out = it->get<double>();
  return Status::Ok();
}

StatusOr<NodePtr> CompileNode(const nlohmann::json& s, const std::string& at);

Status CompileTypes(const nlohmann::json& t, const std::string& at, Node* n) {
  static const std::set<std::string> kTypes = {"null",   "boolean", "object", "array",
                                               "number", "string",  "integer"};
  std::vector<nlohmann::json> list =
      t.is_array() ? t.get<std::vector<nlohmann::json>>() : std::vector<nlohmann::json>{t};
  for (const auto& v : list) {
    if (!v.is_string() || !kTypes.count(v.get<std::string>()))
      return Bad(at, "type must name null, boolean, object, array, number, string or integer");
    n->types.push_back(v.get<std::string>());
  }
  return Status::Ok();
}

Status CompileObjectKeywords(const nlohmann::json& s, const std::string& at, Node* n) {
  if (auto it = s.find("properties"); it != s.end()) {
    if (!it->is_object()) return Bad(at, "properties must be an object");
    for (const auto& item : it->items()) {
      auto sub = CompileNode(item.value(), at + "/properties/" + Token(item.key()));
      if (!sub.ok()) return sub.status();
      n->properties.emplace_back(item.key(), *sub);
    }
  }
  if (auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) return Bad(at, "required must be an array of strings");
    for (const auto& v : *it) {
      if (!v.is_string()) return Bad(at, "required must be an array of strings");
      n->required.push_back(v.get<std::string>());
    }
  }
  if (auto it = s.find("additionalProperties"); it != s.end()) {
    auto sub = CompileNode(*it, at + "/additionalProperties");
    if (!sub.ok()) return sub.status();
    n->additional = *sub;
  }
  return Status::Ok();
}

Status CompileValueKeywords(const nlohmann::json& s, const std::string& at, Node* n) {
  if (auto it = s.find("enum"); it != s.end()) {
    if (!it->is_array()) return Bad(at, "enum must be an array");
    n->enum_values = *it;
  }
  if (auto it = s.find("const"); it != s.end()) n->const_value = *it;
  SAGAD_RETURN_IF_ERROR(Bound(s, "minimum", at, &n->minimum));
  SAGAD_RETURN_IF_ERROR(Bound(s, "maximum", at, &n->maximum));
  SAGAD_RETURN_IF_ERROR(Bound(s, "exclusiveMinimum", at, &n->exclusive_minimum));
  SAGAD_RETURN_IF_ERROR(Bound(s, "exclusiveMaximum", at, &n->exclusive_maximum));
  SAGAD_RETURN_IF_ERROR(Count(s, "minLength", at, &n->min_length));
  SAGAD_RETURN_IF_ERROR(Count(s, "maxLength", at, &n->max_length));
  SAGAD_RETURN_IF_ERROR(Count(s, "minItems", at, &n->min_items));
  SAGAD_RETURN_IF_ERROR(Count(s, "maxItems", at, &n->max_items));
  if (auto it = s.find("pattern"); it != s.end()) {
    if (!it->is_string()) return Bad(at, "pattern must be a string");
    if (it->get_ref<const std::string&>().size() > kMaxPatternLength)
      return Bad(at, "pattern is longer than " + std::to_string(kMaxPatternLength) + " characters");
    re2::RE2::Options options;
    options.set_log_errors(false);
    options.set_max_mem(int64_t(1) << 20);
    auto re = std::make_shared<const re2::RE2>(it->get<std::string>(), options);
    if (!re->ok())
      return Bad(at, "pattern is not a regular expression sagad can use (" + re->error() +
                         "; backreferences and lookaround are not supported)");
    n->pattern = std::move(re);
    n->pattern_source = it->get<std::string>();
  }
  if (auto it = s.find("items"); it != s.end()) {
    auto sub = CompileNode(*it, at + "/items");
    if (!sub.ok()) return sub.status();
    n->items = *sub;
  }
  return Status::Ok();
}

StatusOr<NodePtr> CompileNode(const nlohmann::json& s, const std::string& at) {
  auto n = std::make_shared<Node>();
  if (s.is_boolean()) {
    n->boolean = s.get<bool>();
    return NodePtr(n);
  }
  if (!s.is_object()) return Bad(at, "a schema must be an object or a boolean");
  static const std::set<std::string> kKeywords = {"type",
                                                  "properties",
                                                  "required",
                                                  "additionalProperties",
                                                  "enum",
                                                  "const",
                                                  "minimum",
                                                  "maximum",
                                                  "exclusiveMinimum",
                                                  "exclusiveMaximum",
                                                  "minLength",
                                                  "maxLength",
                                                  "pattern",
                                                  "items",
                                                  "minItems",
                                                  "maxItems"};
  for (const auto& item : s.items())
    if (!kKeywords.count(item.key()) && !Annotations().count(item.key()))
      return Bad(at, "keyword '" + SanitizeUtf8(item.key()) +
                         "' is not supported (supported: type, properties, required, "
                         "additionalProperties, enum, const, minimum, maximum, "
                         "exclusiveMinimum, exclusiveMaximum, minLength, maxLength, pattern, "
                         "items, minItems, maxItems)");
  if (auto it = s.find("type"); it != s.end())
    SAGAD_RETURN_IF_ERROR(CompileTypes(*it, at, n.get()));
  SAGAD_RETURN_IF_ERROR(CompileObjectKeywords(s, at, n.get()));
  SAGAD_RETURN_IF_ERROR(CompileValueKeywords(s, at, n.get()));
  return NodePtr(n);
}

bool IsInteger(const nlohmann::json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

bool HasType(const nlohmann::json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  return IsInteger(v);  // "integer"
}

int64_t CodePoints(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

std::string Num(double d) {
  if (std::floor(d) == d && std::fabs(d) < 9e15) return std::to_string(static_cast<int64_t>(d));
  return DumpJson(nlohmann::json(d));
}

class Checker {
 public:
  explicit Checker(std::vector<SchemaError>* out) : out_(out) {}

  void Check(const Node& n, const nlohmann::json& v, const std::string& at) {
    if (n.boolean) {
      if (!*n.boolean) Fail(at, "no value is allowed here");
      return;
    }
    if (!n.types.empty()) {
      bool any = false;
      for (const auto& t : n.types) any = any || HasType(v, t);
      if (!any) {
        std::string want;
        for (const auto& t : n.types) want += (want.empty() ? "" : " or ") + t;
        Fail(at, "must be of type " + want);
        return;  // the other keywords would only repeat it
      }
    }
    if (n.const_value && !(v == *n.const_value)) Fail(at, "must be " + DumpJson(*n.const_value));
    if (n.enum_values) {
      bool found = false;
      for (const auto& e : *n.enum_values) found = found || v == e;
      if (!found) Fail(at, "must be one of " + DumpJson(*n.enum_values));
    }
    if (v.is_number()) Numbers(n, v.get<double>(), at);
    if (v.is_string()) Strings(n, v.get_ref<const std::string&>(), at);
    if (v.is_array()) Arrays(n, v, at);
    if (v.is_object()) Objects(n, v, at);
  }

 private:
  void Fail(const std::string& at, const std::string& message) { out_->push_back({at, message}); }
  void Numbers(const Node& n, double d, const std::string& at) {
    if (n.minimum && d < *n.minimum) Fail(at, "must be at least " + Num(*n.minimum));
    if (n.maximum && d > *n.maximum) Fail(at, "must be at most " + Num(*n.maximum));
    if (n.exclusive_minimum && d <= *n.exclusive_minimum)
      Fail(at, "must be greater than " + Num(*n.exclusive_minimum));
    if (n.exclusive_maximum && d >= *n.exclusive_maximum)
      Fail(at, "must be less than " + Num(*n.exclusive_maximum));
  }
  void Strings(const Node& n, const std::string& s, const std::string& at) {
    int64_t len = (n.min_length || n.max_length) ? CodePoints(s) : 0;
    if (n.min_length && len < *n.min_length)
      Fail(at, "must be at least " + std::to_string(*n.min_length) + " characters long");
    if (n.max_length && len > *n.max_length)
      Fail(at, "must be at most " + std::to_string(*n.max_length) + " characters long");
    if (n.pattern && s.size() > kMaxPatternSubject)
      Fail(at, "is longer than " + std::to_string(kMaxPatternSubject) +
                   " bytes, too long to be checked against the pattern " +
                   DumpJson(n.pattern_source));
    else if (n.pattern && !re2::RE2::PartialMatch(s, *n.pattern))
      Fail(at, "must match the pattern " + DumpJson(n.pattern_source));
  }
  void Arrays(const Node& n, const nlohmann::json& a, const std::string& at) {
    int64_t size = static_cast<int64_t>(a.size());
    if (n.min_items && size < *n.min_items)
      Fail(at, "must have at least " + std::to_string(*n.min_items) + " items");
    if (n.max_items && size > *n.max_items)
      Fail(at, "must have at most " + std::to_string(*n.max_items) + " items");
    if (n.items)
      for (size_t i = 0; i < a.size(); ++i) Check(*n.items, a[i], at + "/" + std::to_string(i));
  }
  void Objects(const Node& n, const nlohmann::json& o, const std::string& at) {
    for (const auto& r : n.required)
      if (!o.contains(r)) Fail(at + "/" + Token(r), "is required");
    for (const auto& item : o.items()) {
      const std::string here = at + "/" + Token(item.key());
      const Node* sub = nullptr;
      for (const auto& [name, node] : n.properties)
        if (name == item.key()) sub = node.get();
      if (sub)
        Check(*sub, item.value(), here);
      else if (n.additional)
        Check(*n.additional, item.value(), here);
    }
  }
  std::vector<SchemaError>* out_;
};

}  // namespace

StatusOr<InputSchema> InputSchema::Compile(const nlohmann::json& schema) {
  auto root = CompileNode(schema, "");
  if (!root.ok()) return root.status();
  InputSchema s;
  s.source_ = schema;
  s.root_ = *root;
  return s;
}

std::vector<SchemaError> InputSchema::Check(const nlohmann::json& value) const {
  std::vector<SchemaError> out;
  if (root_) Checker(&out).Check(*root_, value, "");
  return out;
}

std::string DescribeSchemaErrors(const std::vector<SchemaError>& errors, const std::string& whole,
                                 size_t at_most) {
  std::string out;
  for (size_t i = 0; i < errors.size() && i < at_most; ++i)
    out += (i ? "; " : "") + (errors[i].path.empty() ? whole : errors[i].path) + " " +
           errors[i].message;
  if (errors.size() > at_most) out += "; ...";
  return out;
}

}  // namespace sagad
