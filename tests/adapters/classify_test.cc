#include "adapters/classify.h"

#include <gtest/gtest.h>

#include "adapters/sha256.h"

namespace sagad {
namespace {

TEST(ClassifyTest, FollowsTheDownstreamProtocol) {
  EXPECT_EQ(ClassifyHttpStatus(200), Outcome::kCommitted);
  EXPECT_EQ(ClassifyHttpStatus(201), Outcome::kCommitted);
  for (int s : {400, 403, 404, 422, 410}) EXPECT_EQ(ClassifyHttpStatus(s), Outcome::kFailed) << s;
  EXPECT_EQ(ClassifyHttpStatus(429), Outcome::kNotExecuted);
  for (int s : {408, 409, 500, 502, 503, 504})
    EXPECT_EQ(ClassifyHttpStatus(s), Outcome::kUnknown) << s;
  EXPECT_EQ(ClassifyTransportError(false), Outcome::kNotExecuted);
  EXPECT_EQ(ClassifyTransportError(true), Outcome::kUnknown);
}

TEST(ClassifyTest, ReconciliationAnswers) {
  using nlohmann::json;
  auto outcome = [](int status, const json& body) {
    return ClassifyQueryAnswer(status, body).outcome;
  };
  EXPECT_EQ(outcome(200, json::object()), QueryOutcome::kHappened);
  EXPECT_EQ(outcome(404, json()), QueryOutcome::kNotHappened);
  EXPECT_EQ(outcome(500, json()), QueryOutcome::kUnknown);
  EXPECT_EQ(outcome(410, json()), QueryOutcome::kUnknown);
  EXPECT_EQ(outcome(202, json()), QueryOutcome::kUnknown);
}

// Regression: a downstream that stores every answer under its key (errors
// included, as Stripe does) says so in the 200 body; a refusal is never
// read as success.
TEST(ClassifyTest, AStoredAnswerCarriesItsOutcome) {
  using nlohmann::json;
  auto outcome = [](const json& body) { return ClassifyQueryAnswer(200, body).outcome; };
  EXPECT_EQ(outcome({{"outcome", "refused"}, {"detail", "cannot receive credits"}}),
            QueryOutcome::kRefused);
  for (int st : {400, 402, 403, 404, 422})
    EXPECT_EQ(outcome({{"http_status", st}}), QueryOutcome::kRefused) << st;
  for (int st : {408, 409, 429, 500, 503})
    EXPECT_EQ(outcome({{"http_status", st}}), QueryOutcome::kUnknown) << st;
  EXPECT_EQ(outcome({{"outcome", "in_progress"}}), QueryOutcome::kUnknown);
  EXPECT_EQ(outcome({{"outcome", "committed"}, {"http_status", 201}}), QueryOutcome::kHappened);
  EXPECT_EQ(outcome({{"http_status", 200}}), QueryOutcome::kHappened);
  // Garbage and contradictions are never taken as an answer.
  EXPECT_EQ(outcome({{"outcome", "done"}}), QueryOutcome::kUnknown);
  EXPECT_EQ(outcome({{"outcome", 1}}), QueryOutcome::kUnknown);
  EXPECT_EQ(outcome({{"http_status", "422"}}), QueryOutcome::kUnknown);
  EXPECT_EQ(outcome({{"outcome", "committed"}, {"http_status", 422}}), QueryOutcome::kUnknown);
  EXPECT_EQ(outcome({{"outcome", "refused"}, {"http_status", 201}}), QueryOutcome::kUnknown);

  QueryResult refused =
      ClassifyQueryAnswer(200, {{"http_status", 422}, {"detail", "cannot receive credits"}});
  EXPECT_NE(refused.error.find("cannot receive credits"), std::string::npos) << refused.error;
  EXPECT_NE(refused.error.find("422"), std::string::npos) << refused.error;
  // The result is the "result" member of a wrapped answer, else the body.
  QueryResult wrapped =
      ClassifyQueryAnswer(200, {{"outcome", "committed"}, {"result", {{"ref", "C-9"}}}});
  EXPECT_EQ(wrapped.external_ref, "C-9");
  EXPECT_EQ(wrapped.result, json({{"ref", "C-9"}}));
  QueryResult plain = ClassifyQueryAnswer(200, {{"ref", "C-1"}, {"result", "x"}});
  EXPECT_EQ(plain.result, json({{"ref", "C-1"}, {"result", "x"}}));
  EXPECT_EQ(plain.external_ref, "C-1");
}

TEST(ClassifyTest, ExternalRefPrefersRefThenId) {
  EXPECT_EQ(ExternalRef({{"ref", "T-1"}, {"id", 7}}), "T-1");
  EXPECT_EQ(ExternalRef({{"id", 7}}), "7");
  EXPECT_EQ(ExternalRef("x"), "");
}

TEST(Sha256Test, HashesCanonicalJsonIndependentlyOfKeyOrder) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto a = nlohmann::json::parse(R"({"b":1,"a":2})");
  auto b = nlohmann::json::parse(R"({"a":2, "b":1})");
  EXPECT_EQ(CanonicalJson(a), CanonicalJson(b));
}

}  // namespace
}  // namespace sagad
