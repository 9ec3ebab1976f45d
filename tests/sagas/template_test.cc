#include "sagas/template.h"

#include <gtest/gtest.h>

namespace sagad {
namespace {

TEST(TemplateTest, WholeStringReferenceKeepsTheJsonType) {
  nlohmann::json input = {{"qty", 3}, {"sku", "A"}};
  TemplateContext ctx;
  ctx.input = &input;
  auto b = RenderBody({{"qty", "{{input.qty}}"}, {"label", "sku {{input.sku}} x{{input.qty}}"}}, ctx);
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
  ASSERT_TRUE(CollectRefs(nlohmann::json{{"a", "{{input.x}}"}, {"b", "{{s.result.y}}"}}, &refs).ok());
  EXPECT_EQ(refs.input_fields, std::set<std::string>{"x"});
  EXPECT_EQ(refs.steps, std::set<std::string>{"s"});
  EXPECT_FALSE(CollectRefs(std::string("/a/{{input.x"), &refs).ok());
  EXPECT_FALSE(CollectRefs(std::string("/a/{{s.other}}"), &refs).ok());
  EXPECT_FALSE(CollectRefs(std::string("/a/{{input}}"), &refs).ok());
}

}  // namespace
}  // namespace sagad

#include "sagas/json_limits.h"

namespace sagad {
namespace {

TEST(JsonLimitsTest, CountsNestingOutsideStringsOnly) {
  EXPECT_TRUE(JsonDepthWithin(R"({"a":[[1]]})", 3));
  EXPECT_FALSE(JsonDepthWithin(R"({"a":[[1]]})", 2));
  EXPECT_TRUE(JsonDepthWithin(R"({"a":"[[[[[[\"{{{{"})", 1));
  EXPECT_FALSE(JsonDepthWithin(std::string(100000, '['), 64));
}

}  // namespace
}  // namespace sagad
