#include "sagas/definition.h"

#include <gtest/gtest.h>

#include "examples/examples.h"

namespace sagad {
namespace {

SagaBuilder TwoSteps() {
  SagaBuilder b("s", 1);
  b.Step("a")
      .Call("svc", "POST", "/a", {{"x", "{{input.x}}"}})
      .Compensate("svc", "POST", "/a/undo");
  return b;
}

TEST(DefinitionTest, BuildsTheReferenceExamples) {
  SagaDefinition ir = IncidentResponse();
  ASSERT_EQ(ir.steps.size(), 4u);
  EXPECT_TRUE(ir.steps[3].irreversible);
  EXPECT_FALSE(ir.steps[3].compensation.has_value());
  EXPECT_EQ(ir.RequiredInputFields(),
            (std::vector<std::string>{"email", "host", "severity", "title", "user"}));
  SagaDefinition of = OrderFulfilment();
  EXPECT_EQ(of.RequiredInputFields(),
            (std::vector<std::string>{"address", "amount", "currency", "customer", "qty", "sku"}));
}

TEST(DefinitionTest, RejectsDuplicateStepNames) {
  auto b = TwoSteps();
  b.Step("a").Call("svc", "POST", "/b").Compensate("svc", "POST", "/b/undo");
  auto d = b.Build();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("duplicate step name 'a'"), std::string::npos);
}

TEST(DefinitionTest, RejectsReversibleStepWithoutCompensation) {
  auto d = SagaBuilder("s", 1).Step("a").Call("svc", "POST", "/a").Build();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("has no compensation"), std::string::npos);
}

TEST(DefinitionTest, RejectsTemplateReferringToUnknownStep) {
  auto d = SagaBuilder("s", 1)
               .Step("a")
               .Call("svc", "POST", "/a/{{nope.ref}}")
               .Compensate("svc", "POST", "/u")
               .Build();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("unknown step 'nope'"), std::string::npos);
}

TEST(DefinitionTest, RejectsTemplateReferringToALaterStep) {
  auto d = SagaBuilder("s", 1)
               .Step("a")
               .Call("svc", "POST", "/a/{{b.ref}}")
               .Compensate("svc", "POST", "/u")
               .Step("b")
               .Call("svc", "POST", "/b")
               .Compensate("svc", "POST", "/u")
               .Build();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("has not run yet"), std::string::npos);
}

TEST(DefinitionTest, CompensationMayReferToItsOwnStep) {
  auto d = SagaBuilder("s", 1)
               .Step("a")
               .Call("svc", "POST", "/a")
               .Compensate("svc", "POST", "/a/{{a.ref}}/undo")
               .Build();
  EXPECT_TRUE(d.ok()) << d.status().ToString();
}

TEST(DefinitionTest, RejectsASecondIrreversibleStep) {
  auto d = SagaBuilder("s", 1)
               .Step("a")
               .Call("svc", "POST", "/a")
               .Irreversible()
               .Step("b")
               .Call("svc", "POST", "/b")
               .Irreversible()
               .Build();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("at most one pivot"), std::string::npos);
}

TEST(DefinitionTest, RejectsAStepAfterThePivotThatCannotBeRetried) {
  auto d = SagaBuilder("s", 1)
               .Step("pay")
               .Call("p", "POST", "/pay")
               .Irreversible()
               .Step("ship")
               .Call("s", "POST", "/ship")
               .Compensate("s", "POST", "/unship")
               .Idempotent(false)
               .Queryable(false)
               .Build();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("neither idempotent nor queryable"), std::string::npos)
      << d.status().message();
  auto ok = SagaBuilder("s", 1)
                .Step("pay")
                .Call("p", "POST", "/pay")
                .Irreversible()
                .Step("ship")
                .Call("s", "POST", "/ship")
                .Compensate("s", "POST", "/unship")
                .Idempotent(false)
                .Build();
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(DefinitionTest, PolicyDeclarationsRoundTripThroughJson) {
  RetryPolicy r;
  r.max_attempts = 7;
  auto d =
      SagaBuilder("s", 2)
          .Deadline(60000)
          .Input({"amount"})
          .InputSchema({{"type", "object"}, {"properties", {{"amount", {{"type", "number"}}}}}})
          .Step("charge")
          .Call("p", "POST", "/c")
          .Compensate("p", "POST", "/r")
          .RequiresApprovalIf("amount", ">", 1000)
          .ApprovalTimeout(5000, "escalate")
          .Retry(r)
          .Deadline(30000)
          .Queryable(false)
          .Build();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto back = SagaDefinition::FromJson(d->ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *d);
  EXPECT_FALSE(SagaBuilder("s", 1)
                   .Step("a")
                   .Call("p", "POST", "/a")
                   .Irreversible()
                   .ApprovalTimeout(10, "explode")
                   .Build()
                   .ok());
  EXPECT_FALSE(SagaBuilder("s", 1)
                   .Step("a")
                   .Call("p", "POST", "/a")
                   .Irreversible()
                   .RequiresApprovalIf("x", "~", 1)
                   .Build()
                   .ok());
}

// Regression: what a definition says is checked before anything runs.
TEST(DefinitionTest, ApprovalRulesNameADeclaredFieldAndNeverSitOnThePivot) {
  auto typo = SagaBuilder("transfer", 1)
                  .Input({"amount"})
                  .Step("debit")
                  .Call("bank", "POST", "/debits")
                  .Compensate("bank", "POST", "/refunds")
                  .RequiresApprovalIf("amout", ">", 1000)
                  .Build();
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("'amout' is not a field"), std::string::npos)
      << typo.status().message();
  auto declared_by_schema =
      SagaBuilder("transfer", 1)
          .InputSchema({{"type", "object"}, {"properties", {{"amount", {{"type", "number"}}}}}})
          .Step("debit")
          .Call("bank", "POST", "/debits")
          .Compensate("bank", "POST", "/refunds")
          .RequiresApprovalIf("amount", ">", 1000)
          .Build();
  EXPECT_TRUE(declared_by_schema.ok()) << declared_by_schema.status().ToString();
  auto on_pivot = SagaBuilder("transfer", 1)
                      .Input({"amount"})
                      .Step("wire")
                      .Call("bank", "POST", "/wires")
                      .Irreversible()
                      .RequiresApprovalIf("amount", ">", 1000)
                      .Build();
  ASSERT_FALSE(on_pivot.ok());
  EXPECT_NE(on_pivot.status().message().find("always wait for an operator"), std::string::npos)
      << on_pivot.status().message();
  // After the pivot a saga only goes forward: no compensation is needed.
  auto after = SagaBuilder("transfer", 1)
                   .Step("debit")
                   .Call("bank", "POST", "/debits")
                   .Compensate("bank", "POST", "/refunds")
                   .Step("wire")
                   .Call("bank", "POST", "/wires")
                   .Irreversible()
                   .Step("notify")
                   .Call("mail", "POST", "/messages")
                   .Build();
  EXPECT_TRUE(after.ok()) << after.status().ToString();
  auto before = SagaBuilder("transfer", 1)
                    .Step("debit")
                    .Call("bank", "POST", "/debits")
                    .Step("wire")
                    .Call("bank", "POST", "/wires")
                    .Irreversible()
                    .Build();
  EXPECT_FALSE(before.ok());  // before the pivot an undo is still needed
  auto schema = SagaBuilder("transfer", 1)
                    .InputSchema({{"type", "object"}, {"patternProperties", {{"x", true}}}})
                    .Step("wire")
                    .Call("bank", "POST", "/wires")
                    .Irreversible()
                    .Build();
  ASSERT_FALSE(schema.ok());
  EXPECT_NE(schema.status().message().find("'patternProperties'"), std::string::npos);
}

TEST(DefinitionTest, InputErrorsNameEachPath) {
  auto d = SagaBuilder("transfer", 1)
               .InputSchema({{"type", "object"},
                             {"required", {"amount"}},
                             {"properties", {{"amount", {{"type", "number"}, {"minimum", 1}}}}}})
               .Step("debit")
               .Call("bank", "POST", "/debits", {{"to", "{{input.to}}"}})
               .Compensate("bank", "POST", "/refunds")
               .Build();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->InputErrors({{"amount", 5}, {"to", "x"}}).empty());
  auto lots = d->InputErrors({{"amount", "lots"}, {"to", "x"}});
  ASSERT_EQ(lots.size(), 1u);
  EXPECT_EQ(lots[0].path, "/amount");
  auto negative = d->InputErrors({{"amount", -5}});
  ASSERT_EQ(negative.size(), 2u);
  EXPECT_EQ(negative[0].path, "/to");  // named by a template: required
  EXPECT_EQ(negative[1].path, "/amount");
  auto back = SagaDefinition::FromJson(d->ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->InputErrors({{"amount", -5}, {"to", "x"}}).size(), 1u);
}

TEST(DefinitionTest, RejectsBadNamesMethodsAndPaths) {
  EXPECT_FALSE(
      SagaBuilder("bad name", 1).Step("a").Call("s", "POST", "/a").Irreversible().Build().ok());
  EXPECT_FALSE(SagaBuilder("s", 1).Step("a:b").Call("s", "POST", "/a").Irreversible().Build().ok());
  EXPECT_FALSE(SagaBuilder("s", 1).Step("a").Call("s", "FETCH", "/a").Irreversible().Build().ok());
  EXPECT_FALSE(SagaBuilder("s", 1).Step("a").Call("s", "POST", "a").Irreversible().Build().ok());
  EXPECT_FALSE(SagaBuilder("s", 0).Step("a").Call("s", "POST", "/a").Irreversible().Build().ok());
  EXPECT_FALSE(SagaBuilder("s", 1).Build().ok());
}

TEST(DefinitionTest, RoundTripsThroughJson) {
  SagaDefinition ir = IncidentResponse();
  auto back = SagaDefinition::FromJson(ir.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, ir);
}

TEST(DefinitionTest, JsonLoadingValidatesLikeTheBuilder) {
  auto d = SagaDefinition::FromJson(
      {{"name", "s"},
       {"steps", {{{"name", "a"}, {"forward", {{"service", "x"}, {"path", "/a"}}}}}}});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("has no compensation"), std::string::npos);
  EXPECT_FALSE(SagaDefinition::FromJson("not an object").ok());
}

// Regression: a CR/LF (or a space, a control byte, non-ASCII) in a literal
// path was written raw into the request line: a second request, without a
// key, followed. Refused at registration, naming the step.
TEST(DefinitionTest, APathThatWouldSplitTheRequestLineIsRefused) {
  for (std::string path :
       {std::string("/a\r\nPOST /b HTTP/1.1"), std::string("/a b"), std::string("/a\x01"),
        std::string("/caf\xc3\xa9"), std::string("/a\"b")}) {
    auto d = SagaBuilder("s", 1).Step("a").Call("svc", "POST", path).Irreversible().Build();
    ASSERT_FALSE(d.ok()) << path;
    EXPECT_NE(d.status().message().find("step 'a' forward: path holds a character"),
              std::string::npos)
        << d.status().message();
  }
  // A template's value is percent-encoded when rendered: allowed.
  EXPECT_TRUE(SagaBuilder("s", 1)
                  .Step("a")
                  .Call("svc", "POST", "/a/{{input.x}}")
                  .Irreversible()
                  .Build()
                  .ok());
}

TEST(DefinitionTest, AGraphLargerThanTheLimitIsRefused) {
  SagaBuilder b("big", 1);
  for (int i = 0; i < 257; ++i)
    b.Step("s" + std::to_string(i)).Call("svc", "POST", "/x").Compensate("svc", "POST", "/u");
  auto d = b.Build();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("257 steps; at most 256"), std::string::npos)
      << d.status().message();
}

TEST(DefinitionTest, ADeadlineOverTenYearsIsRefused) {
  auto j = nlohmann::json::parse(R"({"name": "s", "version": 1, "deadline_ms": 9223372036854775807,
      "steps": [{"name": "a", "forward": {"service": "svc", "method": "POST", "path": "/a"},
                 "irreversible": true}]})");
  auto d = SagaDefinition::FromJson(j);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("deadline_ms must be an integer from 0 to"),
            std::string::npos)
      << d.status().message();
}
TEST(DefinitionTest, AJsonDefinitionWithoutStepsOrWithANestedTemplateIsRefusedPlainly) {
  auto none = SagaDefinition::FromJson({{"name", "s"}, {"version", 1}});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "the saga definition has no \"steps\" (an array of steps)");
  auto nested = SagaBuilder("s", 1)
                    .Step("a")
                    .Call("svc", "POST", "/a/{{input.{{input.b}}}}")
                    .Irreversible()
                    .Build();
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.status().message().find("a template inside a template"), std::string::npos)
      << nested.status().message();
  auto typed =
      SagaDefinition::FromJson({{"name", 5}, {"version", 1}, {"steps", nlohmann::json::array()}});
  ASSERT_FALSE(typed.ok());
  EXPECT_EQ(typed.status().message().find("[json.exception"), std::string::npos)
      << typed.status().message();
}
}  // namespace
}  // namespace sagad
