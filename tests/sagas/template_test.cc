#include "sagas/template.h"

#include <gtest/gtest.h>

namespace sagad {
namespace {

TEST(TemplateTest, WholeStringReferenceKeepsTheJsonType) {
  nlohmann::json input = {{"qty", 3}, {"sku", "A"}};
  TemplateContext ctx;
  ctx.input = &input;
  auto b =
      RenderBody({{"qty", "{{input.qty}}"}, {"label", "sku {{input.sku}} x{{input.qty}}"}}, ctx);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)["qty"], 3);
  EXPECT_EQ((*b)["label"], "sku A x3");
}

TEST(TemplateTest, PathValuesArePercentEncoded) {
  nlohmann::json input = nlohmann::json::object();
  TemplateContext ctx;
  ctx.input = &input;
  ctx.steps["t"] = {{"ref", "a/b c"}, {"result", nullptr}};
  auto p = RenderPath("/tickets/{{t.ref}}/close", ctx);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, "/tickets/a%2Fb%20c/close");
}

TEST(TemplateTest, MissingValueIsAnError) {
  nlohmann::json input = nlohmann::json::object();
  TemplateContext ctx;
  ctx.input = &input;
  EXPECT_FALSE(RenderBody({{"x", "{{input.nope}}"}}, ctx).ok());
  EXPECT_FALSE(RenderPath("/a/{{s.ref}}", ctx).ok());
}

TEST(TemplateTest, CollectsReferencesAndRejectsMalformedOnes) {
  TemplateRefs refs;
  ASSERT_TRUE(
      CollectRefs(nlohmann::json{{"a", "{{input.x}}"}, {"b", "{{s.result.y}}"}}, &refs).ok());
  EXPECT_EQ(refs.input_fields, std::set<std::string>{"x"});
  EXPECT_EQ(refs.steps, std::set<std::string>{"s"});
  EXPECT_FALSE(CollectRefs(std::string("/a/{{input.x"), &refs).ok());
  EXPECT_FALSE(CollectRefs(std::string("/a/{{s.other}}"), &refs).ok());
  EXPECT_FALSE(CollectRefs(std::string("/a/{{input}}"), &refs).ok());
}

}  // namespace
}  // namespace sagad

#include "util/json_limits.h"

namespace sagad {
namespace {

TEST(JsonLimitsTest, CountsNestingOutsideStringsOnly) {
  EXPECT_TRUE(JsonDepthWithin(R"({"a":[[1]]})", 3));
  EXPECT_FALSE(JsonDepthWithin(R"({"a":[[1]]})", 2));
  EXPECT_TRUE(JsonDepthWithin(R"({"a":"[[[[[[\"{{{{"})", 1));
  EXPECT_FALSE(JsonDepthWithin(std::string(100000, '['), 64));
}

TEST(JsonLimitsTest, Utf8IsCheckedAndBadBytesAreKeptAsEscapes) {
  EXPECT_TRUE(IsValidUtf8("plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  for (const char* bad : {"\xff", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                          "\xc3", "a\xe2\x82"})
    EXPECT_FALSE(IsValidUtf8(bad)) << bad;
  EXPECT_EQ(SanitizeUtf8("bad \xff\xfe ok \xc3\xa9"), "bad \\xff\\xfe ok \xc3\xa9");
  EXPECT_TRUE(IsValidUtf8(SanitizeUtf8("\xc0\xaf\xed\xa0\x80")));
  EXPECT_EQ(SanitizeUtf8(std::string("a\0b", 3)), "a\\x00b");  // PostgreSQL cannot hold NUL
  // Printing never throws, whatever a string holds.
  EXPECT_EQ(DumpJson(nlohmann::json("a\xff"
                                    "b")),
            "\"a\xef\xbf\xbd"
            "b\"");
}

TEST(TemplateTest, APathSegmentAValueMakesEmptyOrDotsIsRefused) {
  nlohmann::json input = {
      {"ok", "T-1"}, {"dots", ".."}, {"dot", "."}, {"empty", ""}, {"slash", "../x"}};
  TemplateContext ctx;
  ctx.input = &input;
  EXPECT_EQ(*RenderPath("/tickets/{{input.ok}}/close", ctx), "/tickets/T-1/close");
  EXPECT_EQ(*RenderPath("/tickets/{{input.slash}}/close", ctx), "/tickets/..%2Fx/close");
  EXPECT_EQ(*RenderPath("/t/v{{input.empty}}", ctx), "/t/v");  // the segment keeps its text
  for (const char* f : {"dots", "dot", "empty"}) {
    auto r = RenderPath(std::string("/tickets/{{input.") + f + "}}/close", ctx);
    EXPECT_FALSE(r.ok()) << f;
    EXPECT_NE(r.status().message().find("another path"), std::string::npos) << f;
  }
}

// Regression: {"input": 1, "input": 2} used to be read as the last one.
TEST(JsonLimitsTest, AKeyGivenTwiceInOneObjectIsFoundWithItsPath) {
  EXPECT_EQ(DuplicateKey(R"({"input": {}, "input": {}})"), "/input");
  EXPECT_EQ(DuplicateKey(R"({"input": {"a": 1, "b": [1, {"c": 1, "c": 2}]}})"), "/input/b/1/c");
  EXPECT_EQ(DuplicateKey(R"({"a/b": {"x": 1, "x": 1}})"), "/a~1b/x");
  EXPECT_EQ(DuplicateKey(R"({"a": {"x": 1}, "b": {"x": 1}, "x": [{"x": 1}, {"x": 2}]})"), "");
  EXPECT_EQ(DuplicateKey("not json"), "");
}

}  // namespace
}  // namespace sagad
