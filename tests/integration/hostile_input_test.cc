// Hostile input: bytes that are not UTF-8 in every part of a
// request, broken downstream replies, path tricks, malformed HTTP. sagad must
// answer with a problem+json, keep serving and keep writing.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/testing/cluster.h"
#include "tests/testing/rogue_downstream.h"

namespace sagad::testing {
namespace {

using nlohmann::json;

const json kFastRetry = {{"max_attempts", 3},
                         {"initial_backoff_ms", 10},
                         {"max_backoff_ms", 40},
                         {"max_reconciliations", 3}};

// A request with raw bytes, one connection, closed by sagad after the answer.
std::string Raw(int port, const std::string& method, const std::string& target,
                const std::string& extra_headers = "", const std::string& body = "") {
  std::string req = method + " " + target +
                    " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra_headers;
  if (!body.empty() || (method != "GET" && method != "DELETE"))
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  return RawExchange(port, req + "\r\n" + body);
}

int StatusOf(const std::string& raw) {
  if (raw.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::atoi(raw.c_str() + 9);
}

json BodyOf(const std::string& raw) {
  size_t p = raw.find("\r\n\r\n");
  return p == std::string::npos ? json() : json::parse(raw.substr(p + 4), nullptr, false);
}

// The whole answer arrived: its body is as long as its Content-Length says.
// (A server that closes with part of a bad request unread makes the kernel
// send a reset, which can drop the end of its answer in transit.)
bool Complete(const std::string& raw) {
  size_t p = raw.find("\r\n\r\n");
  size_t cl = raw.find("Content-Length: ");
  if (p == std::string::npos || cl == std::string::npos || cl > p) return false;
  return raw.size() - (p + 4) >= std::stoul(raw.substr(cl + 16));
}

class HostileInputTest : public ::testing::Test {
 protected:
  void Start(json overrides = json::object()) {
    sagad_ = std::make_unique<Coordinator>(downstream_, dir_.path() + "/data", overrides);
    ASSERT_GT(sagad_->Start(), 0);
  }
  // sagad still answers and still commits: a fresh saga runs to its end.
  void ExpectServingAndWritable() {
    ASSERT_EQ(sagad_->Get("/healthz").status, 200);
    Reply r = sagad_->Submit("incident_response", IncidentInput(), 10);
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body["status"], "AWAITING_APPROVAL") << r.raw;
  }
  void ExpectProblem(const std::string& raw, std::initializer_list<int> allowed) {
    int status = StatusOf(raw);
    EXPECT_TRUE(std::find(allowed.begin(), allowed.end(), status) != allowed.end()) << raw;
    EXPECT_NE(raw.find("application/problem+json"), std::string::npos) << raw;
    if (Complete(raw)) {
      EXPECT_TRUE(BodyOf(raw).is_object()) << raw;
    }
  }

  TempDir dir_;
  Downstream downstream_;
  std::unique_ptr<Coordinator> sagad_;
};

TEST_F(HostileInputTest, PathsThatAreNotUtf8AreRefusedAndSagadKeepsServing) {
  Start();
  int p = sagad_->port();
  for (const char* target :
       {"/v1/instances/%FF", "/%FF", "/v1/instances/%C0%AF", "/v1/instances/\xff",
        "/v1/instances/%FF/events", "/v1/instances/%FF/bundle", "/v1/instances?status=%FF",
        "/v1/instances?saga=%FF", "/v1/instances?cursor=%FF", "/v1/instances?%FF=1"}) {
    ExpectProblem(Raw(p, "GET", target), {400, 404});
  }
  for (const char* target :
       {"/v1/sagas/%FF/instances", "/v1/instances/x/steps/%FF/approve", "/v1/instances/%FF/cancel",
        "/v1/sagas/order_fulfilment/instances?wait=%FF"}) {
    ExpectProblem(Raw(p, "POST", target, "Content-Type: application/json\r\n", R"({"input":{}})"),
                  {400, 404});
  }
  ExpectServingAndWritable();
}

TEST_F(HostileInputTest, AnIdempotencyKeyThatIsNotUtf8IsRefusedAndWritesGoOn) {
  Start();
  std::string body = json{{"input", OrderInput()}}.dump();
  std::string raw = Raw(sagad_->port(), "POST", "/v1/sagas/order_fulfilment/instances",
                        "Content-Type: application/json\r\nIdempotency-Key: \xff\r\n", body);
  ExpectProblem(raw, {400});
  EXPECT_NE(BodyOf(raw).value("detail", "").find("Idempotency-Key"), std::string::npos) << raw;
  // Nothing is left "in progress": every later write goes through.
  Reply again = sagad_->Submit("order_fulfilment", OrderInput(), 10, "good-key");
  EXPECT_EQ(again.status, 200) << again.raw;
  ExpectServingAndWritable();
  EXPECT_EQ(sagad_->Terminate(), 0);
}

// A downstream answering bytes that are not UTF-8, in each part of its reply.
TEST_F(HostileInputTest, DownstreamRepliesThatAreNotUtf8AreStoredSafelyAndClassified) {
  std::atomic<int> mode{0};
  RogueDownstream rogue([&](const RawRequest& r) {
    if (r.path.rfind("/operations/", 0) == 0) return RawAnswer(404, "{}");
    switch (mode.load()) {
      case 0:
        return RawAnswer(500, "bad \xff\xfe", "text/plain");
      case 1:
        return RawAnswer(422, "bad \xff\xfe", "text/plain");
      case 2:
        return RawAnswer(201, "{\"ref\":\"\xff\xfe\"}");
      default:
        return RawAnswer(201, "{\"ref\":\"r\xc3\xa9\"}", "application/json\r\nX-Odd: \xff");
    }
  });
  Start({{"inventory", {{"base_url", rogue.url()}, {"retry", kFastRetry}}}});
  const char* expected[] = {"COMPENSATED", "COMPENSATED", "COMPLETED", "COMPLETED"};
  std::vector<std::string> ids;
  for (int m = 0; m < 4; ++m) {
    mode = m;
    Reply r = sagad_->Submit("order_fulfilment", OrderInput(), 10);
    ASSERT_TRUE(r.status == 200 || r.status == 201) << r.raw;
    std::string id = r.body["id"];
    json done = sagad_->WaitStatus(id, expected[m]);
    EXPECT_EQ(done.value("status", ""), expected[m]) << m << ": " << done.dump();
    Reply events = sagad_->Get("/v1/instances/" + id + "/events");
    EXPECT_EQ(events.status, 200);
    EXPECT_TRUE(events.body.is_object()) << events.raw;
    ids.push_back(id);
  }
  // The bad bytes are kept readable, not dropped and not thrown on.
  json errored = sagad_->Get("/v1/instances/" + ids[1]).body;
  EXPECT_NE(errored["steps"][0].value("last_error", "").find("bad \\xff\\xfe"), std::string::npos)
      << errored.dump();
  ExpectServingAndWritable();
  // After a restart the stored replies load and the store still takes writes.
  sagad_->Kill();
  ASSERT_GT(sagad_->Start(), 0);
  for (size_t m = 0; m < ids.size(); ++m)
    EXPECT_EQ(sagad_->Get("/v1/instances/" + ids[m]).body.value("status", ""), expected[m]);
  ExpectServingAndWritable();
}

// Replies that say nothing definite, while the operations endpoint says "it
// never happened": re-sent with backoff, at most max_attempts times, then
// the saga turns back.
TEST_F(HostileInputTest, UnclearRepliesAreResentWithinTheRetryPolicyOnly) {
  std::atomic<int> mode{0};
  RogueDownstream rogue([&](const RawRequest& r) -> RawReply {
    if (r.path.rfind("/operations/", 0) == 0) return RawAnswer(404, "{}");
    switch (mode.load()) {
      case 0:
        return RawAnswer(503, "busy");
      case 1:
        return {"HTTP/1.1 308 X\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n", false};
      case 2:
        return {"HTTP/1.1 201 X\r\nContent-Length: 100\r\n\r\n{\"ref\":", true};
      default:
        return {"garbage\r\n\r\n", true};
    }
  });
  Start({{"inventory", {{"base_url", rogue.url()}, {"retry", kFastRetry}}}});
  for (int m = 0; m < 4; ++m) {
    mode = m;
    int before = rogue.Count("/reservations");
    Reply r = sagad_->Submit("order_fulfilment", OrderInput(), 10);
    ASSERT_TRUE(r.status == 200 || r.status == 201) << r.raw;
    json done = sagad_->WaitStatus(r.body["id"], "COMPENSATED");
    EXPECT_EQ(done.value("status", ""), "COMPENSATED") << m << ": " << done.dump();
    EXPECT_EQ(rogue.Count("/reservations") - before, 3) << "mode " << m;
    EXPECT_EQ(done["steps"][0].value("attempts", 0), 3) << done.dump();
  }
}

TEST_F(HostileInputTest, DotSegmentsAndEmptyValuesNeverChangeTheCalledPath) {
  std::atomic<int> n{0};
  const char* refs[] = {"..", ".", ""};
  RogueDownstream rogue([&](const RawRequest& r) {
    if (r.path.rfind("/reservations/", 0) == 0) return RawAnswer(200, "{}");
    return RawAnswer(201, json{{"ref", refs[n++ % 3]}}.dump());
  });
  Start({{"inventory", {{"base_url", rogue.url()}, {"retry", kFastRetry}}}});
  for (int m = 0; m < 3; ++m) {
    downstream_.Fault({{"path", "/charges"}, {"action", "reject"}});
    Reply r = sagad_->Submit("order_fulfilment", OrderInput(), 10);
    ASSERT_TRUE(r.status == 200 || r.status == 201) << r.raw;
    json done = sagad_->WaitStatus(r.body["id"], "NEEDS_REVIEW");
    EXPECT_EQ(done.value("status", ""), "NEEDS_REVIEW") << done.dump();
    EXPECT_NE(done.value("review_reason", "").find("reserve_inventory.ref"), std::string::npos)
        << done.dump();
  }
  for (const auto& req : rogue.Requests()) {
    EXPECT_EQ(req.path.find("/.."), std::string::npos) << req.path;
    EXPECT_EQ(req.path.find("//"), std::string::npos) << req.path;
    EXPECT_NE(req.path, "/reservations/./release");
  }
  EXPECT_EQ(rogue.Count("/reservations/"), 0);
}

TEST_F(HostileInputTest, RepliesLargerThanTheCapAreNeverStored) {
  std::string big = "{\"ref\":\"big\",\"pad\":\"" + std::string(3 << 20, 'x') + "\"}";
  RogueDownstream rogue([&](const RawRequest& r) {
    if (r.path.rfind("/operations/", 0) == 0) return RawAnswer(200, R"({"ref":"small"})");
    return RawAnswer(201, big);
  });
  Start({{"inventory", {{"base_url", rogue.url()}, {"retry", kFastRetry}}}});
  Reply r = sagad_->Submit("order_fulfilment", OrderInput(), 10);
  ASSERT_TRUE(r.status == 200 || r.status == 201) << r.raw;
  json done = sagad_->WaitStatus(r.body["id"], "COMPLETED");
  ASSERT_EQ(done.value("status", ""), "COMPLETED") << done.dump().substr(0, 2000);
  EXPECT_EQ(done["steps"][0]["external_ref"], "small");  // reconciled, not the big body
  Reply events = sagad_->Get("/v1/instances/" + done["id"].get<std::string>() + "/events");
  EXPECT_LT(events.raw.size(), 64u << 10);
  EXPECT_NE(events.raw.find("larger than"), std::string::npos);
  uintmax_t bytes = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir_.path() + "/data"))
    bytes += f.file_size();
  EXPECT_LT(bytes, uintmax_t(3) << 20);
}

TEST_F(HostileInputTest, AVersionOutsideTheIntegerRangeIsRefused) {
  Start();
  for (const char* v : {"4294967297", "2147483648", "99999999999999999999", "-1", "1x"}) {
    Reply r = Http(sagad_->port(), "POST",
                   std::string("/v1/sagas/order_fulfilment/instances?version=") + v,
                   json{{"input", OrderInput()}}.dump());
    EXPECT_EQ(r.status, 400) << v << ": " << r.raw;
  }
  Reply r = Http(sagad_->port(), "POST", "/v1/sagas/order_fulfilment/instances",
                 json{{"input", OrderInput()}, {"version", 4294967297}}.dump());
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(Http(sagad_->port(), "POST", "/v1/sagas/order_fulfilment/instances?version=1",
                 json{{"input", OrderInput()}}.dump())
                .status,
            201);
}

TEST_F(HostileInputTest, HttpFramingAndMethodsAreChecked) {
  Start();
  int p = sagad_->port();
  // Wrong method on a known route: 405 naming the allowed ones.
  std::string raw = Raw(p, "DELETE", "/v1/instances/abc");
  EXPECT_EQ(StatusOf(raw), 405) << raw;
  EXPECT_NE(raw.find("Allow: GET"), std::string::npos) << raw;
  raw = Raw(p, "GET", "/v1/sagas/order_fulfilment/instances");
  EXPECT_EQ(StatusOf(raw), 405) << raw;
  EXPECT_NE(raw.find("Allow: POST"), std::string::npos) << raw;
  EXPECT_EQ(StatusOf(Raw(p, "PUT", "/v1/instances/abc/cancel")), 405);
  // Content-Length must be one plain number (RFC 9112 section 6.3).
  std::string body = json{{"input", OrderInput()}}.dump();
  std::string n = std::to_string(body.size());
  for (const std::string& cl :
       {"Content-Length: " + n + "\r\nContent-Length: 5\r\n", "Content-Length: +" + n + "\r\n",
        "Content-Length: " + n + ", 5\r\n",
        "Content-Length: " + n + "\r\nTransfer-Encoding: chunked\r\n"}) {
    std::string req =
        "POST /v1/sagas/order_fulfilment/instances HTTP/1.1\r\nHost: localhost\r\n"
        "Connection: close\r\nContent-Type: application/json\r\n" +
        cl + "\r\n" + body;
    ExpectProblem(RawExchange(p, req), {400});
  }
  // A POST must say it is JSON: no cross-site form post gets through.
  Reply form = Http(p, "POST", "/v1/sagas/order_fulfilment/instances", body,
                    {{"Content-Type", "application/x-www-form-urlencoded"}});
  EXPECT_EQ(form.status, 415) << form.raw;
  EXPECT_EQ(StatusOf(Raw(p, "POST", "/v1/instances/abc/cancel")), 415);
  EXPECT_EQ(
      Http(p, "POST", "/v1/instances/abc/cancel", "{}", {{"Content-Type", "text/plain"}}).status,
      415);
  EXPECT_EQ(Http(p, "POST", "/v1/instances/abc/cancel", "{}",
                 {{"Content-Type", "application/json; charset=utf-8"}})
                .status,
            404);
  // A cursor is an instance id.
  EXPECT_EQ(sagad_->Get("/v1/instances?cursor=not-a-cursor!").status, 400);
  EXPECT_EQ(sagad_->Get("/v1/instances?cursor=" + std::string(300, 'a')).status, 400);
  ExpectServingAndWritable();
}

// Every byte 0x00-0xFF in each place the API reads text from a client.
TEST_F(HostileInputTest, EveryByteInEveryClientFieldLeavesSagadUpAndWritable) {
  Start();
  int p = sagad_->port();
  int answered = 0;
  for (int b = 0; b < 256; ++b) {
    std::string c(1, static_cast<char>(b));
    std::string pct = "%" + std::string(1, "0123456789ABCDEF"[b >> 4]) + "0123456789ABCDEF"[b & 15];
    std::vector<std::string> answers = {
        Raw(p, "GET", "/v1/instances/" + pct),
        Raw(p, "GET", "/v1/instances/a" + pct + "b/events"),
        Raw(p, "GET", "/v1/instances?status=" + pct),
        Raw(p, "GET", "/v1/instances?saga=" + pct + "&limit=1"),
        Raw(p, "POST", "/v1/sagas/" + pct + "/instances", "Content-Type: application/json\r\n",
            R"({"input":{}})"),
        Raw(p, "POST", "/v1/instances/x" + pct + "/steps/s" + pct + "/approve",
            "Content-Type: application/json\r\n", "{}"),
        Raw(p, "POST", "/v1/sagas/order_fulfilment/instances",
            "Content-Type: application/json\r\nIdempotency-Key: k" + c + "\r\n",
            json{{"input", OrderInput()}}.dump()),
        Raw(p, "GET", "/v1/approvals", "Authorization: Bearer " + c + "\r\n"),
        Raw(p, "POST", "/v1/sagas/order_fulfilment/instances", "Content-Type: application/json\r\n",
            "{\"input\":{\"sku\":\"" + c +
                "\",\"qty\":1,\"amount\":1,\"currency\":\"E\","
                "\"customer\":\"c\",\"address\":\"a\"}}"),
        Raw(p, "POST", "/v1/instances/x/cancel", "Content-Type: application/json\r\n",
            "{\"reason\":\"" + c + "\"}"),
    };
    for (const std::string& a : answers) {
      int s = StatusOf(a);
      if (s == 0) continue;  // a byte that breaks the request line: the connection is dropped
      ++answered;
      EXPECT_LT(s, 500) << "byte " << b << ": " << a.substr(0, 300);
      if (s >= 400 && Complete(a)) {
        EXPECT_TRUE(BodyOf(a).is_object()) << "byte " << b << ": " << a.substr(0, 300);
      }
    }
  }
  EXPECT_GT(answered, 2000);
  ExpectServingAndWritable();
  EXPECT_EQ(sagad_->Terminate(), 0);
}

// Every byte 0x00-0xFF from a downstream, in the body of each kind of reply
// and in a header: sagad classifies it and goes on.
TEST_F(HostileInputTest, EveryByteFromADownstreamLeavesSagadUpAndWritable) {
  RogueDownstream rogue([&](const RawRequest& r) {
    if (r.path.rfind("/operations/", 0) == 0) return RawAnswer(200, R"({"ref":"asked"})");
    // The amount tells the byte and the kind of reply.
    json in = json::parse(r.body, nullptr, false);
    int amount = in.is_object() ? in.value("amount", 0) : 0;
    std::string c(1, static_cast<char>(amount % 256));
    switch (amount / 256) {
      case 0:
        return RawAnswer(201, "{\"ref\":\"r" + c + "\"}");
      case 1:
        return RawAnswer(201, "{\"ref\":\"r\",\"x\":\"" + c + "\"}",
                         "application/json\r\nX-B: " + c);
      case 2:
        return RawAnswer(500, "boom " + c, "text/plain");
      default:
        return RawAnswer(422, "{\"error\":\"" + c + "\"}");
    }
  });
  // 1,024 sagas at once: every service gets an attempt deadline a slow
  // machine (a sanitizer build beside other tests) passes while requests
  // wait in their connection line or for a starved rogue (with the
  // fixture's 1,000 ms, TSan runs sent some to review, their questions
  // unanswered in time); what is judged is the rogue's bytes, not the
  // throughput.
  Start({{"payments", {{"base_url", rogue.url()}, {"retry", kFastRetry}, {"timeout_ms", 30000}}},
         {"inventory", {{"timeout_ms", 30000}}},
         {"shipping", {{"timeout_ms", 30000}}}});
  std::vector<std::string> ids;
  for (int amount = 0; amount < 4 * 256; ++amount) {
    json in = OrderInput();
    in["amount"] = amount;
    Reply r = sagad_->Submit("order_fulfilment", in);
    ASSERT_EQ(r.status, 201) << amount << ": " << r.raw;
    ids.push_back(r.body["id"]);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    json done = sagad_->WaitStatus(ids[i], i >= 3 * 256 ? "COMPENSATED" : "COMPLETED");
    EXPECT_EQ(done.value("status", ""), i >= 3 * 256 ? "COMPENSATED" : "COMPLETED")
        << "amount " << i << ": " << done.dump();
  }
  ExpectServingAndWritable();
  EXPECT_EQ(sagad_->Terminate(), 0);
}

// Regression: what a new user tried and got silence or a wrong answer for.
TEST_F(HostileInputTest, FiltersBodiesAndRoutesThatCannotMeanAnythingAreRefusedByName) {
  Start();
  const int p = sagad_->port();
  const std::string json_type = "Content-Type: application/json\r\n";
  // A path into the input, or an empty key: 400, never an empty or full list.
  std::string raw = Raw(p, "GET", "/v1/instances?input.a.b=x");
  ExpectProblem(raw, {400});
  EXPECT_NE(BodyOf(raw).value("detail", "").find("top-level input field"), std::string::npos);
  ExpectProblem(Raw(p, "GET", "/v1/instances?idempotency_key="), {400});
  // A bulk filter that names nothing, or an unknown status.
  ExpectProblem(Raw(p, "POST", "/v1/instances/actions/cancel", json_type, R"({"filter":{}})"),
                {400});
  raw = Raw(p, "POST", "/v1/instances/actions/retry", json_type, R"({"filter":{"status":"DONE"}})");
  ExpectProblem(raw, {400});
  EXPECT_NE(BodyOf(raw).value("detail", "").find("'DONE'"), std::string::npos) << raw;
  // A bulk action that does not exist is not an instance called "actions".
  raw = Raw(p, "POST", "/v1/instances/actions/compensate", json_type, "{}");
  ExpectProblem(raw, {404});
  EXPECT_NE(BodyOf(raw).value("detail", "").find("no bulk action 'compensate'"), std::string::npos)
      << raw;
  // An unknown key in an operator's body.
  std::string id = sagad_->Submit("incident_response", IncidentInput(), 10).body.value("id", "");
  ASSERT_FALSE(id.empty());
  raw = Raw(p, "POST", "/v1/instances/" + id + "/cancel", json_type, R"({"reasn":"typo"})");
  ExpectProblem(raw, {400});
  EXPECT_NE(BodyOf(raw).value("detail", "").find("'reasn'"), std::string::npos) << raw;
  raw = Raw(p, "POST", "/v1/services/mail/pause", json_type, R"({"why":"x"})");
  ExpectProblem(raw, {400});
  // Without tokens a bodiless POST still says it is JSON (other web sites
  // cannot); the answer says why.
  raw = Raw(p, "POST", "/v1/instances/" + id + "/cancel");
  ExpectProblem(raw, {415});
  EXPECT_NE(BodyOf(raw).value("detail", "").find("bearer token"), std::string::npos) << raw;
  ExpectServingAndWritable();
}

TEST_F(HostileInputTest, ABodilessPostWithABearerTokenNeedsNoContentType) {
  sagad_ = std::make_unique<Coordinator>(
      downstream_, dir_.path() + "/data", json::object(),
      json::array({{{"name", "ops"}, {"token", "ops-secret"}, {"role", "operator"}}}));
  ASSERT_GT(sagad_->Start(), 0);
  std::string body = json{{"input", IncidentInput()}}.dump();
  std::string created =
      Raw(sagad_->port(), "POST", "/v1/sagas/incident_response/instances?wait=10",
          "Content-Type: application/json\r\nAuthorization: Bearer ops-secret\r\n", body);
  std::string id = BodyOf(created).value("id", "");
  ASSERT_FALSE(id.empty()) << created;
  std::string raw = Raw(sagad_->port(), "POST", "/v1/instances/" + id + "/cancel",
                        "Authorization: Bearer ops-secret\r\n");
  EXPECT_EQ(StatusOf(raw), 200) << raw;
}
}  // namespace
}  // namespace sagad::testing
