// libFuzzer: what the API does with a request body and with text from
// outside: the depth check before parsing, parsing, printing (never throws),
// and UTF-8 sanitizing (its output is always valid UTF-8 without NUL, valid
// text without NUL is unchanged), and U+0000 escaping.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "util/json_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string clean = sagad::SanitizeUtf8(text);
  if (!sagad::IsValidUtf8(clean)) std::abort();
  const bool has_nul = text.find('\0') != std::string::npos;  // written as \x00
  if (sagad::IsValidUtf8(text) && !has_nul && clean != text) std::abort();
  if (clean.find('\0') != std::string::npos) std::abort();
  if (!sagad::JsonDepthWithin(text)) return 0;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return 0;
  // Escaping removes every U+0000 (the API refuses what FindNul finds).
  if (sagad::FindNul(sagad::EscapeNul(j)) != "") std::abort();
  std::string out = sagad::DumpJson(j);
  nlohmann::json back = nlohmann::json::parse(out, nullptr, false);
  if (back.is_discarded()) std::abort();        // what we print parses
  (void)sagad::DumpJson(nlohmann::json(text));  // a string of any bytes prints
  return 0;
}
