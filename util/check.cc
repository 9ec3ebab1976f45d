#include "util/check.h"

#include <cstdio>
#include <cstdlib>

namespace sagad {
namespace check_internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition)
    : file_(file), line_(line), condition_(condition) {}

CheckFailure::~CheckFailure() {
  const std::string context = context_.str();
  std::fprintf(stderr, "sagad: invariant broken at %s:%d: %s%s%s\n", file_, line_, condition_,
               context.empty() ? "" : ": ", context.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace check_internal
}  // namespace sagad
