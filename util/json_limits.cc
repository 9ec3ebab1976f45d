#include "util/json_limits.h"

#include <cstdint>
#include <set>
#include <vector>

namespace sagad {

bool JsonDepthWithin(const std::string& text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

namespace {

// Length of the well-formed UTF-8 sequence at text[i], 0 if there is none
// (RFC 3629 table 3-7: no overlongs, no surrogates, at most U+10FFFF).
size_t SequenceLength(std::string_view text, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  auto cont = [&](size_t k) { return i + k < text.size() && (b(k) & 0xC0) == 0x80; };
  unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t n = SequenceLength(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string SanitizeUtf8(std::string_view text) {
  if (IsValidUtf8(text) && text.find('\0') == std::string_view::npos) return std::string(text);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t i = 0; i < text.size();) {
    size_t n = text[i] == '\0' ? 0 : SequenceLength(text, i);
    if (n > 0) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    unsigned char c = static_cast<unsigned char>(text[i++]);
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

namespace {

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

std::string PointerToken(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else if (c == '\0')
      out += "\\x00";
    else
      out += c;
  }
  return out;
}

std::string EscapeNulText(const std::string& s) {
  if (!HasNul(s)) return s;
  std::string out;
  for (char c : s) {
    if (c == '\0')
      out += "\\x00";
    else
      out += c;
  }
  return out;
}

}  // namespace

namespace {

// Sees keys only; stops at the first one repeated within its object.
class DuplicateKeySax : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string found;

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Open(true); }
  bool start_array(std::size_t) override { return Open(false); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    f.name = k;
    if (!f.keys.insert(k).second) {
      for (const Frame& fr : frames_)
        found += "/" + Escaped(fr.object ? fr.name : std::to_string(fr.index));
      return false;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string name;
    size_t index = 0;
  };
  static std::string Escaped(const std::string& s) {
    std::string out;
    for (char c : s) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return out;
  }
  bool Value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    return true;
  }
  bool Open(bool object) {
    frames_.push_back({object, {}, "", 0});
    return true;
  }
  bool Close() {
    frames_.pop_back();
    return Value();
  }
  std::vector<Frame> frames_;
};

}  // namespace

std::string DuplicateKey(const std::string& text) {
  DuplicateKeySax sax;
  nlohmann::json::sax_parse(text, &sax, nlohmann::json::input_format_t::json, false);
  return sax.found;
}

std::string FindNul(const nlohmann::json& j) {
  if (j.is_string()) return HasNul(j.get_ref<const std::string&>()) ? "/" : "";
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      std::string in = FindNul(j[i]);
      if (!in.empty()) return "/" + std::to_string(i) + (in == "/" ? "" : in);
    }
  } else if (j.is_object()) {
    for (const auto& item : j.items()) {  // the pointer is built only for a find
      if (HasNul(item.key())) return "/" + PointerToken(item.key());
      std::string in = FindNul(item.value());
      if (!in.empty()) return "/" + PointerToken(item.key()) + (in == "/" ? "" : in);
    }
  }
  return "";
}

nlohmann::json EscapeNul(const nlohmann::json& j) {
  if (j.is_string()) return EscapeNulText(j.get_ref<const std::string&>());
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : j) out.push_back(EscapeNul(v));
    return out;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& item : j.items()) out[EscapeNulText(item.key())] = EscapeNul(item.value());
    return out;
  }
  return j;
}

std::string DumpJson(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status OnlyKnownKeys(const nlohmann::json& obj, std::initializer_list<const char*> known,
                     const std::string& where) {
  return OnlyKnownKeys(obj, std::vector<const char*>(known), where);
}

Status OnlyKnownKeys(const nlohmann::json& obj, const std::vector<const char*>& known,
                     const std::string& where) {
  if (!obj.is_object()) return Status::Ok();
  for (const auto& item : obj.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || item.key() == k;
    if (ok) continue;
    std::string list;
    for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    return InvalidArgument("unknown key '" + SanitizeUtf8(item.key()) + "' in " + where +
                           " (known: " + list + ")");
  }
  return Status::Ok();
}

bool AsInt64(const nlohmann::json& j, int64_t* out) {
  if (j.is_number_integer()) {
    if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX)) return false;
    *out = j.get<int64_t>();
    return true;
  }
  if (!j.is_number_float()) return false;
  double d = j.get<double>();
  // 2^63 is exact as a double; [-2^63, 2^63) converts without overflow.
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) ||
      d != static_cast<double>(static_cast<int64_t>(d)))
    return false;
  *out = static_cast<int64_t>(d);
  return true;
}

std::string JsonErrorText(const std::exception& e) {
  std::string what = e.what();
  if (!what.empty() && what[0] == '[') {
    size_t end = what.find("] ");
    if (end != std::string::npos) what = what.substr(end + 2);
  }
  return what;
}

}  // namespace sagad
