// Limits on untrusted JSON text (request bodies, downstream responses) and
// the one way sagad turns JSON into text.
#pragma once

#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace sagad {

constexpr int kMaxJsonDepth = 64;

// True if arrays/objects in `text` nest at most `max_depth` levels deep
// (brackets inside strings do not count). Checked before parsing: the JSON
// library recurses when it copies, prints or destroys a document, so a
// hostile 200,000-level body would otherwise overflow the stack.
bool JsonDepthWithin(const std::string& text, int max_depth = kMaxJsonDepth);

// True if `text` is well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF). JSON strings must be: the library throws when it
// prints a string that is not.
bool IsValidUtf8(std::string_view text);

// `text` with every byte that is not part of a well-formed UTF-8 sequence,
// and every NUL (which PostgreSQL cannot store in text), written as the four
// characters \xHH (so "bad \xff" stays readable and nothing is silently
// dropped). Valid text comes back unchanged. For bytes
// that come from outside (downstream replies) before they enter a JSON value.
std::string SanitizeUtf8(std::string_view text);

// The JSON Pointer (RFC 6901) of the first string in `j`, value or object
// key, that holds U+0000, or "" if there is none ("/" for a string that is
// the whole document). U+0000 is refused in what
// the API receives: PostgreSQL cannot store it in jsonb or text, and a
// value that one store keeps and the other refuses is a trap.
std::string FindNul(const nlohmann::json& j);

// The JSON Pointer (RFC 6901) of the first object key in `text` that appears
// twice in its object ("/input" for two "input" at the top), or "" if none
// does (or `text` is not JSON). RFC 8259 leaves such documents'
// meaning open, and the library keeps the last: refused instead, so that
// what sagad acts on is what every reader of the text sees.
std::string DuplicateKey(const std::string& text);

// `j` with every U+0000 in its strings and keys written as the four
// characters \x00, as SanitizeUtf8 writes a bad byte: for values from
// outside (downstream replies) that must be recorded, never refused.
nlohmann::json EscapeNul(const nlohmann::json& j);

// j as compact (indent < 0) or indented JSON text. Never throws: a string
// that is somehow not UTF-8 is printed with U+FFFD in place of the bad bytes
// instead of aborting the write, the log line or the response it belongs to.
std::string DumpJson(const nlohmann::json& j, int indent = -1);

// `j` as a 64-bit integer: an integer in range, or a finite float with no
// fraction in range. False for anything else (converting an out-of-range
// float is undefined behaviour, which nlohmann's get<int64_t> does; found by
// fuzz_replay).
bool AsInt64(const nlohmann::json& j, int64_t* out);

// The longest timeout, deadline, backoff or retention a definition or the
// config may set: ten years in ms (added to a time in ms, it never
// overflows 64 bits).
constexpr int64_t kMaxDurationMs = int64_t(10) * 365 * 24 * 3600 * 1000;

// obj[key] as an integer in [lo, hi] into *out (left as it is when absent);
// InvalidArgument "<where>: <key> must be an integer from lo to hi".
template <typename Int>
Status IntField(const nlohmann::json& obj, const char* key, int64_t lo, int64_t hi,
                const std::string& where, Int* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::Ok();
  int64_t v = 0;
  if (!AsInt64(*it, &v) || v < lo || v > hi)
    return InvalidArgument(where + ": " + key + " must be an integer from " + std::to_string(lo) +
                           " to " + std::to_string(hi));
  *out = static_cast<Int>(v);
  return Status::Ok();
}

// The text of a JSON library exception without the library's own prefix
// ("[json.exception.out_of_range.403] key 'x' not found" -> "key 'x' not
// found"): what a definition's author can act on.
std::string JsonErrorText(const std::exception& e);

// InvalidArgument naming the first key of `obj` that is not in `known`
// ("unknown key 'x' in <where> (known: a, b)"): a misspelt setting must not
// be silently ignored. Non-objects pass (their type is checked elsewhere).
Status OnlyKnownKeys(const nlohmann::json& obj, std::initializer_list<const char*> known,
                     const std::string& where);
Status OnlyKnownKeys(const nlohmann::json& obj, const std::vector<const char*>& known,
                     const std::string& where);

}  // namespace sagad
