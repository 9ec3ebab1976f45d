// The coordinator HTTP API: submission idempotency, operator actions, bad
// input and auth, against a real sagad process.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <sstream>

#include "adapters/sha256.h"
#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

class ApiTest : public ::testing::Test {
 protected:
  void Start(nlohmann::json tokens = nlohmann::json::array()) {
    coordinator_ = std::make_unique<Coordinator>(downstream_, dir_.path() + "/data",
                                                 nlohmann::json::object(), tokens);
    ASSERT_GT(coordinator_->Start(), 0);
  }
  void SetUp() override { Start(); }
  void ExpectProblem(const Reply& r, int status, const std::string& detail_part = "") {
    EXPECT_EQ(r.status, status) << r.raw;
    EXPECT_EQ(r.header("Content-Type"), "application/problem+json") << r.raw;
    EXPECT_EQ(r.body.value("status", 0), status) << r.raw;
    if (!detail_part.empty()) {
      EXPECT_NE(r.body.value("detail", "").find(detail_part), std::string::npos) << r.raw;
    }
  }

  TempDir dir_;
  Downstream downstream_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(ApiTest, InstancesAreSearchedByTheirIdempotencyKeyOrAnInputField) {
  std::vector<std::string> ids;
  for (const char* customer : {"acme", "globex", "acme"}) {
    nlohmann::json input = OrderInput();
    input["customer"] = customer;
    Reply r =
        coordinator_->Submit("order_fulfilment", input, 10, "order-" + std::to_string(ids.size()));
    ASSERT_EQ(r.status, 200) << r.raw;
    ids.push_back(r.body["id"]);
  }
  auto found = [&](const std::string& query) {
    Reply r = coordinator_->Get("/v1/instances?" + query);
    EXPECT_EQ(r.status, 200) << r.raw;
    std::vector<std::string> out;
    for (const auto& i : r.body["instances"]) out.push_back(i["id"]);
    return out;
  };
  EXPECT_EQ(found("idempotency_key=order-1"), std::vector<std::string>{ids[1]});
  EXPECT_TRUE(found("idempotency_key=order-9").empty());
  EXPECT_EQ(found("input.customer=acme"), (std::vector<std::string>{ids[2], ids[0]}));
  EXPECT_EQ(found("input.customer=acme&status=COMPLETED&limit=1").size(), 1u);
  EXPECT_TRUE(found("input.customer=initech").empty());
  ExpectProblem(coordinator_->Get("/v1/instances?input.customer=a&input.sku=b"), 400,
                "one input field");
  ExpectProblem(coordinator_->Get("/v1/instances?input.=x"), 400, "unknown query parameter");
}

TEST_F(ApiTest, ResubmissionWithTheSameKeyReplaysTheOriginalResponse) {
  Reply first = coordinator_->Submit("order_fulfilment", OrderInput(), 10, "order-42");
  ASSERT_EQ(first.status, 200) << first.raw;
  Reply again = coordinator_->Submit("order_fulfilment", OrderInput(), 10, "order-42");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(again.body["id"], first.body["id"]);
  EXPECT_EQ(downstream_.Effects()["total"], 3);
  Reply list = coordinator_->Get("/v1/instances");
  EXPECT_EQ(list.body["instances"].size(), 1u);
}

TEST_F(ApiTest, SameKeyWithAnotherBodyIs422) {
  ASSERT_EQ(coordinator_->Submit("order_fulfilment", OrderInput(), 0, "k1").status, 201);
  nlohmann::json other = OrderInput();
  other["qty"] = 99;
  ExpectProblem(coordinator_->Submit("order_fulfilment", other, 0, "k1"), 422);
}

TEST_F(ApiTest, SameKeyWhileTheFirstIsInFlightIs409) {
  downstream_.Fault({{"path", "/reservations"}, {"action", "delay"}, {"delay_ms", 1000}});
  auto first = std::async(std::launch::async, [&] {
    return coordinator_->Submit("order_fulfilment", OrderInput(), 10, "slow");
  });
  // The first submission is in flight once its first step sits in the downstream.
  ASSERT_TRUE(WaitFor([&] { return downstream_.Effects()["pending"] == 1; }));
  ExpectProblem(coordinator_->Submit("order_fulfilment", OrderInput(), 0, "slow"), 409);
  EXPECT_EQ(first.get().status, 200);
  Reply replay = coordinator_->Submit("order_fulfilment", OrderInput(), 0, "slow");
  EXPECT_EQ(replay.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(replay.status, 200);
}

TEST_F(ApiTest, BadInputGetsProblemJsonAndSagadKeepsServing) {
  int port = coordinator_->port();
  ExpectProblem(Http(port, "POST", "/v1/sagas/order_fulfilment/instances", "{not json"), 400,
                "not valid JSON");
  ExpectProblem(Http(port, "POST", "/v1/sagas/order_fulfilment/instances", "[1,2]"), 400);
  ExpectProblem(Http(port, "POST", "/v1/sagas/order_fulfilment/instances", R"({"input": 5})"), 400);
  ExpectProblem(coordinator_->Submit("no_such_saga", OrderInput()), 404, "no_such_saga");
  ExpectProblem(coordinator_->Submit("order_fulfilment", {{"sku", "x"}}), 400, "amount");
  ExpectProblem(coordinator_->Get("/v1/instances/does-not-exist"), 404);
  ExpectProblem(coordinator_->Get("/v1/instances/does-not-exist/events"), 404);
  ExpectProblem(coordinator_->Get("/v1/instances?status=WHATEVER"), 400);
  ExpectProblem(coordinator_->Get("/v1/instances?limit=0"), 400);
  ExpectProblem(Http(port, "POST", "/v1/sagas/order_fulfilment/instances?wait=abc",
                     nlohmann::json{{"input", OrderInput()}}.dump()),
                400);
  std::string deep =
      R"({"input":{"address":)" + std::string(200000, '[') + std::string(200000, ']') + "}}";
  ExpectProblem(Http(port, "POST", "/v1/sagas/order_fulfilment/instances", deep), 400,
                "nests deeper");
  std::string huge = R"({"input":{"pad":")" + std::string(2 << 20, 'x') + R"("}})";
  Reply big = Http(port, "POST", "/v1/sagas/order_fulfilment/instances", huge);
  EXPECT_EQ(big.status, 413);
  ExpectProblem(coordinator_->Get("/v1/nothing/here"), 404);
  EXPECT_EQ(coordinator_->Get("/healthz").status, 200);
  EXPECT_EQ(coordinator_->Get("/readyz").status, 200);
  EXPECT_EQ(coordinator_->Get("/v1/instances").body["instances"].size(), 0u);  // nothing created
}

TEST_F(ApiTest, OperatorActionsAreAllowedOnlyWhereSafe) {
  Reply r = coordinator_->Submit("incident_response", IncidentInput(), 10);
  std::string id = r.body["id"];
  ExpectProblem(coordinator_->Post("/v1/instances/" + id + "/steps/create_ticket/approve"), 409,
                "not awaiting approval");
  ExpectProblem(coordinator_->Post("/v1/instances/" + id + "/steps/nope/approve"), 404);
  ExpectProblem(coordinator_->Post("/v1/instances/" + id + "/steps/notify_user/resolve",
                                   {{"outcome", "committed"}}),
                409);
  ASSERT_EQ(coordinator_->Post("/v1/instances/" + id + "/steps/notify_user/approve").status, 200);
  EXPECT_EQ(coordinator_->Post("/v1/instances/" + id + "/steps/notify_user/approve").status, 200);
  coordinator_->WaitStatus(id, "COMPLETED");
  EXPECT_EQ(downstream_.RouteCount("send_message"), 1);
  int approvals = 0;
  for (const auto& e : Events(*coordinator_, id)) approvals += e["type"] == "approved";
  EXPECT_EQ(approvals, 1);
  ExpectProblem(coordinator_->Post("/v1/instances/" + id + "/steps/notify_user/reject"), 409);
}

TEST_F(ApiTest, ListsNewestFirstWithCursorAndStatusFilter) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(coordinator_->Submit("order_fulfilment", OrderInput(), 10).body["id"]);
  coordinator_->Submit("incident_response", IncidentInput(), 10);
  Reply page = coordinator_->Get("/v1/instances?saga=order_fulfilment&limit=2");
  ASSERT_EQ(page.body["instances"].size(), 2u);
  EXPECT_EQ(page.body["instances"][0]["id"], ids[2]);
  Reply rest = coordinator_->Get("/v1/instances?saga=order_fulfilment&limit=2&cursor=" +
                                 page.body["next_cursor"].get<std::string>());
  ASSERT_EQ(rest.body["instances"].size(), 1u);
  EXPECT_EQ(rest.body["instances"][0]["id"], ids[0]);
  EXPECT_EQ(coordinator_->Get("/v1/instances?status=AWAITING_APPROVAL").body["instances"].size(),
            1u);
  Reply sagas = coordinator_->Get("/v1/sagas");
  EXPECT_EQ(sagas.body["sagas"].size(), 3u);  // incident_response, order_fulfilment, trip_booking
}

class AuthTest : public ApiTest {
 protected:
  void SetUp() override {
    // alice's token is configured by its SHA-256 only: the file holds no secret.
    Start({{{"name", "viewer-v"}, {"token", "tv"}, {"role", "viewer"}},
           {{"name", "client-c"}, {"token", "tc"}, {"role", "submitter"}},
           {{"name", "alice"}, {"token_sha256", Sha256Hex("ta")}, {"role", "operator"}}});
  }
  Reply As(const std::string& token, const std::string& method, const std::string& path,
           const nlohmann::json& body = nullptr) {
    return Http(coordinator_->port(), method, path, body.is_null() ? "" : body.dump(),
                {{"Authorization", "Bearer " + token}});
  }
};

TEST_F(AuthTest, RolesGateEachActionAndApprovalsRecordWho) {
  ExpectProblem(coordinator_->Get("/v1/instances"), 401);
  ExpectProblem(As("wrong", "GET", "/v1/instances"), 401);
  EXPECT_EQ(As("tv", "GET", "/v1/instances").status, 200);
  nlohmann::json body = {{"input", IncidentInput()}};
  ExpectProblem(As("tv", "POST", "/v1/sagas/incident_response/instances", body), 403);
  Reply r = As("tc", "POST", "/v1/sagas/incident_response/instances?wait=10", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  std::string id = r.body["id"];
  std::string approve = "/v1/instances/" + id + "/steps/notify_user/approve";
  ExpectProblem(As("tc", "POST", approve, nlohmann::json::object()), 403);
  Reply ok = As("ta", "POST", approve, {{"comment", "looks right"}});
  ASSERT_EQ(ok.status, 200) << ok.raw;
  EXPECT_EQ(ok.body["steps"][3]["approval"]["by"], "alice");
  EXPECT_EQ(ok.body["steps"][3]["approval"]["comment"], "looks right");
}

}  // namespace
}  // namespace sagad::testing

namespace sagad::testing {
namespace {

TEST(StartupTest, RefusesANonLoopbackAddressWithoutTokensAndBadArguments) {
  TempDir dir;
  Subprocess open_to_all({SAGAD_BIN, "--data-dir", dir.path() + "/d", "--listen", "0.0.0.0:0"});
  EXPECT_EQ(open_to_all.Wait(), 2);
  Subprocess bad_flag({SAGAD_BIN, "--frobnicate"});
  EXPECT_EQ(bad_flag.Wait(), 2);
  Subprocess bad_service({SAGAD_BIN, "--service", "payments"});
  EXPECT_EQ(bad_service.Wait(), 2);
  // A misspelt key in the config file: refused at start, naming it.
  std::string config = dir.path() + "/typo.json";
  std::ofstream(config) << R"({"listen": "127.0.0.1:0", "tokenz": []})";
  std::string err = dir.path() + "/typo.err";
  Subprocess typo({SAGAD_BIN, "--config", config}, {}, err);
  EXPECT_EQ(typo.Wait(), 2);
  std::ifstream in(err);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("unknown key 'tokenz'"), std::string::npos) << text.str();
}

}  // namespace
}  // namespace sagad::testing
