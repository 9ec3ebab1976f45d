// SAGAD_CHECK(cond) << "context": an invariant that stays checked in every
// build (release included). When it does not hold, the process writes one
// line naming the file, the line, the condition and the context to stderr
// and aborts: a coordinator whose own bookkeeping is wrong must stop before
// it sends a second request or writes a wrong record; everything durable
// so far is recovered by the next start.
//
// For expected failures (bad input, a downstream down, a lost race) return a
// Status instead; a CHECK is for what no input and no fault may cause.
#pragma once

#include <sstream>
#include <string>

namespace sagad {
namespace check_internal {

// Collects the context, then aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    context_ << v;
    return *this;
  }

 private:
  const char* file_;
  int line_;
  const char* condition_;
  std::ostringstream context_;
};

// Turns the stream expression into void so that both arms of ?: match.
struct Voidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace check_internal
}  // namespace sagad

#define SAGAD_CHECK(cond)                       \
  (cond) ? (void)0                              \
         : ::sagad::check_internal::Voidify() & \
               ::sagad::check_internal::CheckFailure(__FILE__, __LINE__, #cond)
