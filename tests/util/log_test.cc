// Repeats of one error are limited, and the next line says how many were
// left out; other lines are never limited.
#include "util/log.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace sagad {
namespace {

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(LogTest, OneErrorRepeatedByEveryInstanceIsWrittenAtMostTenTimesASecond) {
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 300; ++i)
    EngineLog({{"msg", "transition failed"},
               {"instance", "i-" + std::to_string(i)},
               {"error", "the store is full"}});
  for (int i = 0; i < 30; ++i) EngineLog({{"msg", "instance created"}, {"instance", "x"}});
  std::string out = ::testing::internal::GetCapturedStderr();
  // A second may turn during the loop: at most two windows' worth.
  EXPECT_LE(Count(out, "transition failed"), 20) << out;
  EXPECT_GE(Count(out, "transition failed"), 10) << out;
  EXPECT_EQ(Count(out, "instance created"), 30);  // no error: never limited
}

}  // namespace
}  // namespace sagad
