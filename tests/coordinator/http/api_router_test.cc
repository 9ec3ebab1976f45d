#include "coordinator/http/api_router.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace sagad {
namespace {

HttpRequest Request(const std::string& method, const std::string& path,
                    std::multimap<std::string, std::string> params = {}) {
  HttpRequest r;
  r.method = method;
  r.path = path;
  r.target = path;
  r.params = std::move(params);
  return r;
}

class ApiRouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_.Route("GET", {"/v1/instances/{id}"}, R"(/v1/instances/([^/]+))",
                  [this](HttpRequest& req, HttpResponse& res) {
                    seen_ = req.matches.size() > 1 ? req.matches[1] : "";
                    res.status = 200;
                  });
    router_.Route("POST", {"/v1/instances/{id}/cancel", "/v1/instances/{id}/compensate"},
                  R"(/v1/instances/([^/]+)/(cancel|compensate))",
                  [](HttpRequest&, HttpResponse& res) { res.status = 200; });
    router_.TakesParams("GET", "/v1/instances/{id}", {"wait"});
    router_.Get("GET", "/ui", [](HttpRequest&, HttpResponse& res) { res.status = 308; });
  }
  HttpResponse Dispatch(HttpRequest req) {
    HttpResponse res;
    router_.Dispatch(req, res);
    return res;
  }

  ApiRouter router_;
  std::string seen_;
};

TEST_F(ApiRouterTest, ARouteGetsItsGroupsAndItsParameters) {
  HttpResponse res = Dispatch(Request("GET", "/v1/instances/abc", {{"wait", "5"}}));
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(seen_, "abc");
}

TEST_F(ApiRouterTest, HeadIsServedAsGet) {
  EXPECT_EQ(Dispatch(Request("HEAD", "/v1/instances/abc")).status, 200);
}

TEST_F(ApiRouterTest, AnUnknownParameterIsRefusedByName) {
  HttpResponse res = Dispatch(Request("GET", "/v1/instances/abc", {{"wiat", "5"}}));
  EXPECT_EQ(res.status, 400);
  std::string detail = nlohmann::json::parse(res.body).value("detail", "");
  EXPECT_NE(detail.find("'wiat'"), std::string::npos) << detail;
  EXPECT_NE(detail.find("takes: wait"), std::string::npos) << detail;
}

TEST_F(ApiRouterTest, AnotherMethodOnAKnownPathIs405WithAllow) {
  HttpResponse res = Dispatch(Request("DELETE", "/v1/instances/abc"));
  EXPECT_EQ(res.status, 405);
  bool allow = false;
  for (const auto& [k, v] : res.headers)
    if (k == "Allow") allow = v == "GET, HEAD";
  EXPECT_TRUE(allow);
}

TEST_F(ApiRouterTest, AnUnknownPathIs404AndAConsoleRouteTakesAnyParameter) {
  EXPECT_EQ(Dispatch(Request("GET", "/v2/nothing")).status, 404);
  EXPECT_EQ(Dispatch(Request("GET", "/ui", {{"anything", "1"}})).status, 308);
}

TEST_F(ApiRouterTest, EveryOpenApiPathIsListed) {
  std::vector<std::string> want = {"GET /v1/instances/{id}", "POST /v1/instances/{id}/cancel",
                                   "POST /v1/instances/{id}/compensate"};
  EXPECT_EQ(router_.routes(), want);
}

// The pattern dialect, matched segment by segment: a group per ([^/]+),
// ([^/]*) and (a|b), in order; a literal with an escaped dot; no match with
// a segment more, less or empty where one is needed.
TEST(ApiRouterDialectTest, EachSegmentMatchesAsItsRegularExpressionDid) {
  ApiRouter router;
  std::vector<std::string> seen;
  auto keep = [&seen](HttpRequest& req, HttpResponse& res) {
    seen = req.matches;
    res.status = 200;
  };
  router.Get("POST", R"(/v1/instances/([^/]+)/steps/([^/]+)/(approve|reject))", keep);
  router.Get("GET", R"(/v1/openapi\.json)", keep);
  router.Get("GET", R"(/ui/([^/]*))", keep);
  router.Get("GET", R"(/x/(|a\.b))", keep);
  auto status = [&router](const std::string& method, const std::string& path) {
    HttpResponse res;
    HttpRequest req = Request(method, path);
    router.Dispatch(req, res);
    return res.status;
  };
  EXPECT_EQ(status("POST", "/v1/instances/i-1/steps/pay/reject"), 200);
  EXPECT_EQ(seen, (std::vector<std::string>{"/v1/instances/i-1/steps/pay/reject", "i-1", "pay",
                                            "reject"}));
  EXPECT_EQ(status("POST", "/v1/instances/i-1/steps/pay/skip"), 404);
  EXPECT_EQ(status("POST", "/v1/instances//steps/pay/reject"), 404);
  EXPECT_EQ(status("POST", "/v1/instances/i-1/steps/pay/reject/"), 404);
  EXPECT_EQ(status("POST", "/v1/instances/i-1/steps/pay"), 404);
  EXPECT_EQ(status("GET", "/v1/openapi.json"), 200);
  EXPECT_EQ(status("GET", "/v1/openapiXjson"), 404);
  EXPECT_EQ(status("GET", "/ui/"), 200);
  EXPECT_EQ(seen, (std::vector<std::string>{"/ui/", ""}));
  EXPECT_EQ(status("GET", "/ui/app.js"), 200);
  EXPECT_EQ(seen[1], "app.js");
  EXPECT_EQ(status("GET", "/ui/a/b"), 404);
  EXPECT_EQ(status("GET", "/x/"), 200);
  EXPECT_EQ(status("GET", "/x/a.b"), 200);
  EXPECT_EQ(status("GET", "/x/ab"), 404);
  EXPECT_EQ(status("GET", "no-slash"), 404);
}

TEST(ApiRouterDialectTest, APatternOutsideTheDialectIsRefusedWhenAdded) {
  EXPECT_DEATH(ApiRouter().Get("GET", R"(/ui/[a-z]+\.js)", nullptr), "not in the router's dialect");
  EXPECT_DEATH(ApiRouter().Get("GET", "v1/no-slash", nullptr), "route pattern");
}

}  // namespace
}  // namespace sagad
