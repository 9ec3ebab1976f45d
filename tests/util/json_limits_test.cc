#include "util/json_limits.h"

#include <gtest/gtest.h>

#include <string>

namespace sagad {
namespace {

TEST(JsonLimitsTest, DepthCountsBracketsOutsideStringsOnly) {
  EXPECT_TRUE(JsonDepthWithin("[[[]]]", 3));
  EXPECT_FALSE(JsonDepthWithin("[[[[]]]]", 3));
  EXPECT_TRUE(JsonDepthWithin(R"({"a": "[[[[[[[["})", 1));
  EXPECT_TRUE(JsonDepthWithin(R"({"a": "\"[[[["})", 1));
  EXPECT_FALSE(JsonDepthWithin(std::string(200000, '[') + std::string(200000, ']')));
}

TEST(JsonLimitsTest, Utf8IsCheckedStrictly) {
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // truncated
}

TEST(JsonLimitsTest, SanitizeWritesBadBytesAndNulReadablyAndKeepsValidText) {
  EXPECT_EQ(SanitizeUtf8("ok \xc3\xa9"), "ok \xc3\xa9");
  EXPECT_EQ(SanitizeUtf8("bad \xff"), "bad \\xff");
  EXPECT_EQ(SanitizeUtf8(std::string("a\0b", 3)), "a\\x00b");
}

TEST(JsonLimitsTest, NulIsFoundByItsPointerAndEscapedOnRequest) {
  nlohmann::json j = {{"a", {{"b", std::string("x\0y", 3)}}}};
  EXPECT_EQ(FindNul(j), "/a/b");
  EXPECT_EQ(FindNul({{"a", 1}}), "");
  EXPECT_EQ(FindNul(nlohmann::json(std::string("\0", 1))), "/");
  nlohmann::json escaped = EscapeNul(j);
  EXPECT_EQ(FindNul(escaped), "");
  EXPECT_EQ(escaped["a"]["b"], "x\\x00y");
}

TEST(JsonLimitsTest, ADuplicateKeyIsNamedByItsObjectsPointer) {
  EXPECT_EQ(DuplicateKey(R"({"input": 1, "input": 2})"), "/input");
  EXPECT_EQ(DuplicateKey(R"({"a": {"b": 1, "b": 2}})"), "/a/b");
  EXPECT_EQ(DuplicateKey(R"({"a": 1, "b": {"a": 2}})"), "");
  EXPECT_EQ(DuplicateKey("not json"), "");
}

TEST(JsonLimitsTest, IntegersAreCheckedBeforeConversion) {
  int64_t v = 0;
  EXPECT_TRUE(AsInt64(nlohmann::json(42), &v));
  EXPECT_EQ(v, 42);
  EXPECT_TRUE(AsInt64(nlohmann::json(3.0), &v));
  EXPECT_FALSE(AsInt64(nlohmann::json(3.5), &v));
  EXPECT_FALSE(AsInt64(nlohmann::json(1e300), &v));
  EXPECT_FALSE(AsInt64(nlohmann::json("7"), &v));
  int field = 5;
  EXPECT_TRUE(IntField(nlohmann::json::object(), "n", 1, 10, "x", &field).ok());
  EXPECT_EQ(field, 5);  // absent: unchanged
  Status s = IntField(nlohmann::json{{"n", 11}}, "n", 1, 10, "the config", &field);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "the config: n must be an integer from 1 to 10");
}

TEST(JsonLimitsTest, AnUnknownKeyIsNamed) {
  Status s = OnlyKnownKeys(nlohmann::json{{"limt", 5}}, {"limit"}, "the query");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'limt'"), std::string::npos) << s.message();
  EXPECT_TRUE(OnlyKnownKeys(nlohmann::json{{"limit", 5}}, {"limit"}, "q").ok());
  EXPECT_TRUE(OnlyKnownKeys(nlohmann::json(3), {"limit"}, "q").ok());
}

TEST(JsonLimitsTest, DumpNeverThrowsOnBadUtf8) {
  nlohmann::json j = std::string("\xff");
  std::string out;
  EXPECT_NO_THROW(out = DumpJson(j));
  EXPECT_FALSE(out.empty());
  EXPECT_EQ(DumpJson({{"a", 1}}), R"({"a":1})");
}

}  // namespace
}  // namespace sagad
