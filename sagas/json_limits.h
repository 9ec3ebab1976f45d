// Limits on untrusted JSON text (request bodies, downstream responses).
#pragma once

#include <string>

namespace sagad {

constexpr int kMaxJsonDepth = 64;

// True if arrays/objects in `text` nest at most `max_depth` levels deep
// (brackets inside strings do not count). Checked before parsing: the JSON
// library recurses when it copies, prints or destroys a document, so a
// hostile 200,000-level body would otherwise overflow the stack.
bool JsonDepthWithin(const std::string& text, int max_depth = kMaxJsonDepth);

}  // namespace sagad
