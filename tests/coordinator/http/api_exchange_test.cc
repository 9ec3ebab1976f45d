#include "coordinator/http/api_exchange.h"

#include <gtest/gtest.h>

namespace sagad {
namespace {

int StatusFor(const Status& s) {
  HttpRequest req;
  req.path = "/v1/x";
  HttpResponse res;
  ProblemFromStatus(req, res, s);
  return res.status;
}

TEST(ApiExchangeTest, EveryStatusCodeMapsToItsProblem) {
  EXPECT_EQ(StatusFor(InvalidArgument("x")), 400);
  EXPECT_EQ(StatusFor(NotFound("x")), 404);
  EXPECT_EQ(StatusFor(AlreadyExists("x")), 422);
  EXPECT_EQ(StatusFor(FailedPrecondition("x")), 409);
  EXPECT_EQ(StatusFor(Aborted("x")), 409);
  EXPECT_EQ(StatusFor(LeaseLost("x")), 409);
  EXPECT_EQ(StatusFor(MovedOn("x")), 409);
  EXPECT_EQ(StatusFor(Unavailable("x")), 503);
  EXPECT_EQ(StatusFor(Internal("x")), 500);
}

TEST(ApiExchangeTest, AProblemIsRfc9457) {
  HttpRequest req;
  req.path = "/v1/instances/1";
  HttpResponse res;
  Problem(req, res, 409, "not now", {{"errors", {1}}});
  EXPECT_EQ(res.status, 409);
  auto j = nlohmann::json::parse(res.body);
  EXPECT_EQ(j["status"], 409);
  EXPECT_EQ(j["detail"], "not now");
  EXPECT_EQ(j["instance"], "/v1/instances/1");
  EXPECT_EQ(j["errors"], nlohmann::json({1}));
  EXPECT_TRUE(j.contains("title"));
}

TEST(ApiExchangeTest, CursorsVersionsAndJsonContentTypes) {
  EXPECT_TRUE(ValidCursor(""));
  EXPECT_FALSE(ValidCursor("../etc"));
  int v = 0;
  EXPECT_TRUE(ParseVersion("3", &v));
  EXPECT_EQ(v, 3);
  EXPECT_FALSE(ParseVersion("0", &v));
  EXPECT_FALSE(ParseVersion("2147483648", &v));
  EXPECT_FALSE(ParseVersion("1x", &v));
  EXPECT_TRUE(IsJsonContentType("application/json"));
  EXPECT_TRUE(IsJsonContentType("application/json; charset=utf-8"));
  EXPECT_FALSE(IsJsonContentType("text/plain"));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
}

TEST(ApiExchangeTest, WaitIsCappedAndAbsentIsNegative) {
  HttpRequest req;
  HttpResponse res;
  double wait = 0;
  EXPECT_TRUE(WaitParam(req, res, &wait));
  EXPECT_LT(wait, 0);
  req.params = {{"wait", "1000"}};
  EXPECT_TRUE(WaitParam(req, res, &wait));
  EXPECT_EQ(wait, kMaxWaitSeconds);
  req.params = {{"wait", "soon"}};
  EXPECT_FALSE(WaitParam(req, res, &wait));
  EXPECT_EQ(res.status, 400);
}

TEST(ApiExchangeTest, AbandonmentRunsItsFunctionOnceWhicheverComesFirst) {
  int runs = 0;
  Abandonment a;
  a.Set([&] { ++runs; });
  a.Fire();
  a.Fire();
  EXPECT_EQ(runs, 1);
  Abandonment gone;
  gone.Fire();
  gone.Set([&] { ++runs; });  // the client left already: runs at once
  EXPECT_EQ(runs, 2);
}

// The hashes a key's first request is stored with keep their forms: a
// change would make every replay after an upgrade a refusal. (The expected
// values are sha256sum of the forms, computed outside sagad.)
TEST(ApiExchangeTest, EachKeyedRequestHashesInTheFormStoredHashesWereMadeIn) {
  const nlohmann::json body = {{"input", {{"a", 1}}}};
  EXPECT_EQ(RequestHash(KeyedRequest::kSubmission, "order_fulfilment", body),
            "6bff67e1f0ac249cf02f569bd3a9e507499048c3fddf8888ce572419e70cbd6b");
  EXPECT_EQ(RequestHash(KeyedRequest::kRunOpening, "ops", body),
            "0e085bd60dee295e4af5b0106b0dfa56bc65d33cef867fe4b689c303795a514b");
  EXPECT_EQ(RequestHash(KeyedRequest::kMcpSession, "ops", body["input"]),
            "450715090f6891af063ec6d147694c2aabb010d427019bc4cbe15c31099eba62");
}

}  // namespace
}  // namespace sagad
