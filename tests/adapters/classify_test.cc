#include "adapters/classify.h"

#include <gtest/gtest.h>

#include "adapters/sha256.h"

namespace sagad {
namespace {

TEST(ClassifyTest, FollowsTheDownstreamProtocol) {
  EXPECT_EQ(ClassifyHttpStatus(200), Outcome::kCommitted);
  EXPECT_EQ(ClassifyHttpStatus(201), Outcome::kCommitted);
  for (int s : {400, 403, 404, 422, 410})
    EXPECT_EQ(ClassifyHttpStatus(s), Outcome::kFailed) << s;
  EXPECT_EQ(ClassifyHttpStatus(429), Outcome::kNotExecuted);
  for (int s : {408, 409, 500, 502, 503, 504})
    EXPECT_EQ(ClassifyHttpStatus(s), Outcome::kUnknown) << s;
  EXPECT_EQ(ClassifyTransportError(false), Outcome::kNotExecuted);
  EXPECT_EQ(ClassifyTransportError(true), Outcome::kUnknown);
}

TEST(ClassifyTest, ReconciliationAnswers) {
  EXPECT_EQ(ClassifyQueryStatus(200), QueryOutcome::kHappened);
  EXPECT_EQ(ClassifyQueryStatus(404), QueryOutcome::kNotHappened);
  EXPECT_EQ(ClassifyQueryStatus(500), QueryOutcome::kUnknown);
  EXPECT_EQ(ClassifyQueryStatus(410), QueryOutcome::kUnknown);
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
