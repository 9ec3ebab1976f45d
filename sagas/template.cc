#include "sagas/template.h"

#include <cctype>
#include <vector>

#include "util/json_limits.h"

namespace sagad {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Calls fn(expr) for each {{expr}}; returns literal pieces via out (if set).
Status ForEachExpr(const std::string& text, const std::function<Status(const std::string&)>& fn) {
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string::npos) return Status::Ok();
    size_t close = text.find("}}", open + 2);
    if (close == std::string::npos)
      return InvalidArgument("unterminated '{{' in template \"" + text + "\"");
    SAGAD_RETURN_IF_ERROR(fn(Trim(text.substr(open + 2, close - open - 2))));
    pos = close + 2;
  }
}

Status ParseExpr(const std::string& expr, TemplateRefs* refs) {
  std::vector<std::string> parts = Split(expr, '.');
  for (const auto& p : parts)
    if (p.empty()) return InvalidArgument("malformed template reference '{{" + expr + "}}'");
  if (expr.find_first_of("{}") != std::string::npos)
    return InvalidArgument("template reference '{{" + expr +
                           "}}' holds a brace: a template inside a template is not supported");
  if (parts[0] == "input") {
    if (parts.size() < 2) return InvalidArgument("'{{input}}' needs a field: '{{input.<field>}}'");
    refs->input_fields.insert(parts[1]);
    return Status::Ok();
  }
  if (parts.size() < 2 || (parts[1] != "ref" && parts[1] != "result") ||
      (parts[1] == "ref" && parts.size() != 2)) {
    return InvalidArgument("template reference '{{" + expr +
                           "}}' must be input.<field>, <step>.ref or "
                           "<step>.result[.<field>]");
  }
  refs->steps.insert(parts[0]);
  return Status::Ok();
}

StatusOr<nlohmann::json> Resolve(const std::string& expr, const TemplateContext& ctx) {
  std::vector<std::string> parts = Split(expr, '.');
  const nlohmann::json* cur = nullptr;
  size_t i = 1;
  if (parts[0] == "input") {
    cur = ctx.input;
  } else {
    auto it = ctx.steps.find(parts[0]);
    if (it == ctx.steps.end()) return InvalidArgument("'{{" + expr + "}}': step has no result yet");
    cur = &it->second;
  }
  for (; cur != nullptr && i < parts.size(); ++i) {
    if (!cur->is_object() || !cur->contains(parts[i])) {
      cur = nullptr;
      break;
    }
    cur = &(*cur)[parts[i]];
  }
  if (cur == nullptr || cur->is_null()) return InvalidArgument("'{{" + expr + "}}' has no value");
  return *cur;
}

std::string AsText(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : DumpJson(v);
}

// The text with each {{expr}} replaced by what `fn` makes of it.
StatusOr<std::string> MapExprs(const std::string& text,
                               const std::function<StatusOr<std::string>(const std::string&)>& fn) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string::npos) break;
    size_t close = text.find("}}", open + 2);
    if (close == std::string::npos)
      return InvalidArgument("unterminated '{{' in template \"" + text + "\"");
    out += text.substr(pos, open - pos);
    auto v = fn(Trim(text.substr(open + 2, close - open - 2)));
    if (!v.ok()) return v.status();
    out += *v;
    pos = close + 2;
  }
  out += text.substr(pos);
  return out;
}

StatusOr<std::string> Interpolate(const std::string& text, const TemplateContext& ctx,
                                  bool encode) {
  return MapExprs(text, [&](const std::string& expr) -> StatusOr<std::string> {
    auto v = Resolve(expr, ctx);
    if (!v.ok()) return v.status();
    return encode ? PercentEncode(AsText(*v)) : AsText(*v);
  });
}

bool IsWholeExpr(const std::string& s) {
  return s.size() > 4 && s.rfind("{{", 0) == 0 && s.compare(s.size() - 2, 2, "}}") == 0 &&
         s.find("{{", 2) == std::string::npos;
}

}  // namespace

std::string PercentEncode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Status CollectRefs(const std::string& text, TemplateRefs* refs) {
  return ForEachExpr(text, [&](const std::string& e) { return ParseExpr(e, refs); });
}

Status CollectRefs(const nlohmann::json& body, TemplateRefs* refs) {
  if (body.is_string()) return CollectRefs(body.get<std::string>(), refs);
  if (body.is_object() || body.is_array()) {
    for (const auto& item : body.items()) {
      if (body.is_object()) SAGAD_RETURN_IF_ERROR(CollectRefs(item.key(), refs));
      SAGAD_RETURN_IF_ERROR(CollectRefs(item.value(), refs));
    }
  }
  return Status::Ok();
}

StatusOr<std::string> RenderPath(const std::string& path, const TemplateContext& ctx) {
  // Segment by segment: a value may fill a segment but never make it empty,
  // "." or ".." (which a server or proxy would resolve to another path).
  std::string out;
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    std::string segment =
        path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    auto rendered = Interpolate(segment, ctx, /*encode=*/true);
    if (!rendered.ok()) return rendered.status();
    if (segment.find("{{") != std::string::npos &&
        (rendered->empty() || *rendered == "." || *rendered == ".."))
      return InvalidArgument("'" + segment + "' renders the path segment \"" + *rendered +
                             "\" in \"" + path + "\"; refusing to call another path");
    out += *rendered;
    if (slash == std::string::npos) break;
    out += '/';
    start = slash + 1;
  }
  return out;
}

StatusOr<nlohmann::json> RenderBody(const nlohmann::json& body, const TemplateContext& ctx) {
  if (body.is_string()) {
    const std::string& s = body.get_ref<const std::string&>();
    if (IsWholeExpr(s)) return Resolve(Trim(s.substr(2, s.size() - 4)), ctx);
    auto r = Interpolate(s, ctx, /*encode=*/false);
    if (!r.ok()) return r.status();
    return nlohmann::json(*r);
  }
  if (body.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& item : body.items()) {
      auto v = RenderBody(item.value(), ctx);
      if (!v.ok()) return v.status();
      out[item.key()] = std::move(*v);
    }
    return out;
  }
  if (body.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : body) {
      auto r = RenderBody(v, ctx);
      if (!r.ok()) return r.status();
      out.push_back(std::move(*r));
    }
    return out;
  }
  return body;
}

StatusOr<std::string> RewriteRefs(const std::string& text, const RefMap& map) {
  return MapExprs(text, [&](const std::string& expr) -> StatusOr<std::string> {
    auto mapped = map(expr);
    if (!mapped.ok()) return mapped.status();
    return "{{" + *mapped + "}}";
  });
}

StatusOr<nlohmann::json> RewriteRefs(const nlohmann::json& body, const RefMap& map) {
  if (body.is_string()) {
    auto s = RewriteRefs(body.get<std::string>(), map);
    if (!s.ok()) return s.status();
    return nlohmann::json(*s);
  }
  if (!body.is_object() && !body.is_array()) return body;
  nlohmann::json out = body;
  for (auto& item : out.items()) {
    auto v = RewriteRefs(item.value(), map);
    if (!v.ok()) return v.status();
    item.value() = std::move(*v);
  }
  return out;
}

}  // namespace sagad
