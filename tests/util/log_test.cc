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

TEST(LogTest, LinesBelowTheLevelAreNotWrittenAndEachSaysItsLevel) {
  ::testing::internal::CaptureStderr();
  EngineLog(LogLevel::kDebug, {{"msg", "step call"}});
  EngineLog({{"msg", "service paused"}});
  SetLogLevel(LogLevel::kDebug);
  EngineLog(LogLevel::kDebug, {{"msg", "lease acquired"}});
  SetLogLevel(LogLevel::kError);
  EngineLog(LogLevel::kWarn, {{"msg", "lease lost"}});
  EngineLog(LogLevel::kError, {{"msg", "store failure"}});
  SetLogLevel(LogLevel::kInfo);
  std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(Count(out, "step call"), 0) << out;
  EXPECT_EQ(Count(out, "\"level\":\"info\",\"msg\":\"service paused\""), 1) << out;
  EXPECT_EQ(Count(out, "\"level\":\"debug\",\"msg\":\"lease acquired\""), 1) << out;
  EXPECT_EQ(Count(out, "lease lost"), 0) << out;
  EXPECT_EQ(Count(out, "\"level\":\"error\",\"msg\":\"store failure\""), 1) << out;
  LogLevel level;
  EXPECT_TRUE(ParseLogLevel("warn", &level));
  EXPECT_EQ(level, LogLevel::kWarn);
  EXPECT_FALSE(ParseLogLevel("WARN", &level));
}

}  // namespace
}  // namespace sagad
