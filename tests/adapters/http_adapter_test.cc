// HttpAdapter against a real HTTP downstream on loopback (a test double: it
// answers as each test tells it).
#include "adapters/http_adapter.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "tests/testing/subprocess.h"
#include "tests/testing/thread_names.h"

namespace sagad {
namespace {

// Polls `cond` until it holds or 10 s pass.
template <typename F>
bool WaitUntil(F cond) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

class HttpAdapterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post(R"(/status/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> l(mu_);
        last_ = req;
      }
      res.status = std::stoi(req.matches[1]);
      res.set_content(R"({"id":"R-1","ok":true})", "application/json");
    });
    server_.Get(R"(/operations/(.+))", [](const httplib::Request& req, httplib::Response& res) {
      std::string key = req.matches[1];
      if (key == "k-missing") {
        res.status = 404;
        return;
      }
      if (key == "k-refused")
        return res.set_content(R"({"outcome":"refused"})", "application/json");
      if (key == "k-busy")
        return res.set_content(R"({"outcome":"in_progress"})", "application/json");
      res.set_content(R"({"id":"R-9"})", "application/json");  // the body is the result
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() before the loop runs would be lost, and TearDown would wait for ever.
    ASSERT_TRUE(WaitUntil([this] { return server_.is_running(); }));
    ServiceConfig svc;
    svc.name = "svc";
    svc.base_url = "http://127.0.0.1:" + std::to_string(port_);
    svc.timeout_ms = 2000;
    ServiceConfig down = svc;
    down.name = "down";
    down.base_url = "http://127.0.0.1:1";  // nothing listens there
    ServiceConfig named = svc;
    named.name = "named";
    named.base_url = "http://localhost:" + std::to_string(port_);
    adapter_ = std::make_unique<HttpAdapter>(
        std::map<std::string, ServiceConfig>{{"svc", svc}, {"down", down}, {"named", named}});
  }
  void TearDown() override {
    adapter_.reset();  // its idle keep-alive connections would hold the server's threads
    server_.stop();
    thread_.join();
  }
  CallResult Send(const std::string& service, int status) {
    CallRequest req;
    req.service = service;
    req.method = "POST";
    req.path = "/status/" + std::to_string(status);
    req.body = {{"sku", "kit"}};
    req.idempotency_key = "i1:reserve";
    req.instance_id = "i1";
    req.step = "reserve";
    req.fencing_token = 7;
    req.attempt = 2;
    return adapter_->Call(req);
  }
  QueryOutcome Ask(const std::string& key) {
    return adapter_->Query("svc", key, "i1", 7, 1, TraceContext{}).outcome;
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  httplib::Request last_;
  std::unique_ptr<HttpAdapter> adapter_;
};

TEST_F(HttpAdapterTest, ACallCarriesItsKeyInstanceStepTokenAndAttempt) {
  CallResult r = Send("svc", 201);
  EXPECT_EQ(r.outcome, Outcome::kCommitted);
  EXPECT_EQ(r.http_status, 201);
  EXPECT_EQ(r.result["id"], "R-1");
  std::lock_guard<std::mutex> l(mu_);
  EXPECT_EQ(last_.get_header_value("Idempotency-Key"), "i1:reserve");
  EXPECT_EQ(last_.get_header_value("Saga-Instance"), "i1");
  EXPECT_EQ(last_.get_header_value("Saga-Step"), "reserve");
  EXPECT_EQ(last_.get_header_value("Saga-Fencing-Token"), "7");
  EXPECT_EQ(last_.get_header_value("Saga-Attempt"), "2");
  EXPECT_EQ(nlohmann::json::parse(last_.body), nlohmann::json({{"sku", "kit"}}));
}

TEST_F(HttpAdapterTest, EachAnswerIsClassifiedAsTheProtocolSays) {
  EXPECT_EQ(Send("svc", 422).outcome, Outcome::kFailed);
  EXPECT_EQ(Send("svc", 429).outcome, Outcome::kNotExecuted);
  EXPECT_EQ(Send("svc", 503).outcome, Outcome::kUnknown);
  EXPECT_EQ(Send("svc", 409).outcome, Outcome::kUnknown);
  EXPECT_EQ(Send("svc", 408).outcome, Outcome::kUnknown);
}

size_t ThreadCount() { return ThreadNames().size(); }

// The threads of this process once the test double answered a request of
// its own client: cpp-httplib starts its thread pool after it says it is
// running, and a sanitizer's runtime may start a thread of its own.
size_t ThreadCountOnceServing(int port) {
  httplib::Client warm("127.0.0.1", port);
  EXPECT_TRUE(warm.Get("/operations/warm-up")) << "the test double does not answer";
  return ThreadCount();
}

// Asio's resolver runs a thread of its own from its first use: a service
// whose host is an IP address is connected to without one. (A host name
// needs it: the second half shows the count can move.)
TEST_F(HttpAdapterTest, AServiceAtAnIpAddressIsCalledWithoutAResolverThread) {
  const size_t before = ThreadCountOnceServing(port_);
  EXPECT_EQ(Send("svc", 201).outcome, Outcome::kCommitted);
  EXPECT_EQ(Send("down", 201).outcome, Outcome::kNotExecuted);
  EXPECT_EQ(ThreadCount(), before);
  EXPECT_EQ(Send("named", 201).outcome, Outcome::kCommitted);
  EXPECT_GT(ThreadCount(), before);
}

TEST_F(HttpAdapterTest, ARefusedConnectionIsNotSentAndSaysWhere) {
  CallResult r = Send("down", 201);
  EXPECT_EQ(r.outcome, Outcome::kNotExecuted);
  EXPECT_EQ(r.http_status, 0);
  EXPECT_NE(r.error.find("127.0.0.1:1"), std::string::npos) << r.error;
}

TEST_F(HttpAdapterTest, ReconciliationAnswersCarryTheOutcome) {
  EXPECT_EQ(Ask("k-missing"), QueryOutcome::kNotHappened);
  EXPECT_EQ(Ask("k-refused"), QueryOutcome::kRefused);
  EXPECT_EQ(Ask("k-busy"), QueryOutcome::kUnknown);
  auto q = adapter_->Query("svc", "k-done", "i1", 7, 1, TraceContext{});
  EXPECT_EQ(q.outcome, QueryOutcome::kHappened);
  EXPECT_EQ(q.result["id"], "R-9");
}

TEST_F(HttpAdapterTest, AReplyLargerThanTheCapIsNotReadAndItsOutcomeIsUnknown) {
  server_.Post("/big", [](const httplib::Request&, httplib::Response& res) {
    res.status = 201;
    res.set_content("{\"ref\":\"big\",\"pad\":\"" + std::string(3 << 20, 'x') + "\"}",
                    "application/json");
  });
  ServiceConfig svc;
  svc.name = "svc";
  svc.base_url = "http://127.0.0.1:" + std::to_string(port_);
  svc.max_response_bytes = 1 << 20;
  HttpAdapter capped({{"svc", svc}});
  CallRequest req;
  req.service = "svc";
  req.method = "POST";
  req.path = "/big";
  req.idempotency_key = "k";
  CallResult r = capped.Call(req);
  EXPECT_EQ(r.outcome, Outcome::kUnknown);
  EXPECT_NE(r.error.find("larger than 1048576 bytes"), std::string::npos) << r.error;
  EXPECT_TRUE(r.result.is_null());
}

TEST_F(HttpAdapterTest, AnUnknownServiceIsNotConfigured) {
  EXPECT_EQ(adapter_->Service("nope"), nullptr);
  ASSERT_NE(adapter_->Service("svc"), nullptr);
  EXPECT_EQ(adapter_->Service("svc")->timeout_ms, 2000);
}

// A downstream that answers one byte every 50 ms: a per-read timeout never
// fires, only the attempt's deadline ends the call. `from_head`: the status
// line itself drips; else the head comes at once and the body drips.
class Dripping {
 public:
  explicit Dripping(bool from_head) : from_head_(from_head) {
    fd_ = testing::ListenOnLoopback(&port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~Dripping() {
    done_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  int written() const { return written_; }
  static constexpr int kBodyBytes = 400;

 private:
  void Serve() {
    int c = accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    char buf[4096];
    (void)!read(c, buf, sizeof buf);  // the request
    std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                       std::to_string(kBodyBytes) + "\r\n\r\n";
    std::string all = head + std::string(kBodyBytes, ' ');
    size_t at = 0;
    if (!from_head_) {
      (void)!send(c, head.data(), head.size(), MSG_NOSIGNAL);
      at = head.size();
    }
    for (; at < all.size() && !done_; ++at) {
      if (send(c, &all[at], 1, MSG_NOSIGNAL) != 1) break;  // the client gave up
      ++written_;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the drip itself
    }
    close(c);
  }
  bool from_head_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> done_{false};
  std::atomic<int> written_{0};
  std::thread thread_;
};

class DeadlineTest : public ::testing::TestWithParam<bool> {};

TEST_P(DeadlineTest, TimeoutMsEndsTheWholeAttemptOfADrippingDownstream) {
  Dripping drip(GetParam());
  ServiceConfig svc;
  svc.name = "drip";
  svc.base_url = "http://127.0.0.1:" + std::to_string(drip.port());
  svc.timeout_ms = 400;
  HttpAdapter adapter({{"drip", svc}});
  CallRequest req;
  req.service = "drip";
  req.method = "POST";
  req.path = "/x";
  req.body = {{"a", 1}};
  req.idempotency_key = "k";
  CallResult r = adapter.Call(req);
  // The request was sent: what the downstream did is unknown (reconciled).
  EXPECT_EQ(r.outcome, Outcome::kUnknown);
  EXPECT_NE(r.error.find("within timeout_ms (400 ms"), std::string::npos) << r.error;
  // It gave up long before the reply was whole (8 bytes a second of a few hundred).
  EXPECT_LT(drip.written(), 100);
}

INSTANTIATE_TEST_SUITE_P(HeadOrBody, DeadlineTest, ::testing::Values(true, false));

// An adapter for one service "svc" on loopback `port`, whose line of
// requests waiting for a connection the ConnectionLimitTests exercise.
std::unique_ptr<HttpAdapter> LineAdapter(int port, int timeout_ms, int max_connections) {
  ServiceConfig svc;
  svc.name = "svc";
  svc.base_url = "http://127.0.0.1:" + std::to_string(port);
  svc.timeout_ms = timeout_ms;
  svc.max_connections = max_connections;
  return std::make_unique<HttpAdapter>(std::map<std::string, ServiceConfig>{{"svc", svc}});
}

// Twenty-four calls at once to a service of four connections, each answered
// after 500 ms: never more than four at the downstream or four connections
// opened, and every call is answered although the last waits 2.5 s, longer
// than timeout_ms (the attempt's deadline starts when it has its
// connection). The 1.5 s left to each call is for a sanitizer build on a
// loaded machine: a call that times out closes its connection, and the next
// opens another while the downstream still works on the first.
TEST(ConnectionLimitTest, CallsBeyondMaxConnectionsWaitUnsentForOne) {
  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(32); };
  server.set_keep_alive_max_count(1000);  // else it closes each after 5 requests
  std::mutex mu;
  int now = 0, most = 0;
  std::set<int> ports;
  server.Post("/x", [&](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> l(mu);
      most = std::max(most, ++now);
      ports.insert(req.remote_port);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the downstream's work
    {
      std::lock_guard<std::mutex> l(mu);
      --now;
    }
    res.set_content(R"({"ok":true})", "application/json");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread t([&] { server.listen_after_bind(); });
  ASSERT_TRUE(WaitUntil([&] { return server.is_running(); }));
  auto adapter = LineAdapter(port, /*timeout_ms=*/2000, /*max_connections=*/4);
  constexpr int kCalls = 24;
  std::atomic<int> answered{0}, committed{0};
  for (int i = 0; i < kCalls; ++i) {
    CallRequest req;
    req.service = "svc";
    req.method = "POST";
    req.path = "/x";
    req.body = {{"i", i}};
    req.idempotency_key = "k" + std::to_string(i);
    adapter->CallAsync(req, [&](CallResult r) {
      committed += r.outcome == Outcome::kCommitted;
      ++answered;
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return answered == kCalls; }));
  EXPECT_EQ(committed, kCalls);
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_LE(most, 4);
    EXPECT_GE(most, 2);  // they did run side by side
    EXPECT_LE(ports.size(), 4u);
  }
  adapter.reset();
  server.stop();
  t.join();
}

// Regression: a 200 whose body is not JSON was read as "it happened".
TEST_F(HttpAdapterTest, AnAnswerThatIsNotJsonLeavesTheOutcomeUnclear) {
  server_.Get("/operations-text/(.+)", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("<html>OK</html>", "text/html");
  });
  ServiceConfig svc;
  svc.name = "svc";
  svc.base_url = "http://127.0.0.1:" + std::to_string(port_);
  svc.operations_path = "/operations-text/{key}";
  HttpAdapter adapter(std::map<std::string, ServiceConfig>{{"svc", svc}});
  auto q = adapter.Query("svc", "k-1", "i1", 7, 1, TraceContext{});
  EXPECT_EQ(q.outcome, QueryOutcome::kUnknown);
  EXPECT_NE(q.error.find("not JSON"), std::string::npos) << q.error;
}

// Regression, at the adapter: a request that waited in the service's
// connection line is asked again, right before its first byte is written,
// whether it may still leave; refused, it is never written (withheld).
TEST(ConnectionLimitTest, ARequestWaitingInLineIsWithheldWhenItMayNoLongerLeave) {
  httplib::Server server;
  std::atomic<int> arrived{0};
  std::atomic<bool> release{false};
  server.Post("/x", [&](const httplib::Request&, httplib::Response& res) {
    ++arrived;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    res.set_content(R"({"ok":true})", "application/json");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread t([&] { server.listen_after_bind(); });
  ASSERT_TRUE(WaitUntil([&] { return server.is_running(); }));
  auto adapter = LineAdapter(port, /*timeout_ms=*/10000, /*max_connections=*/1);
  std::atomic<bool> lease_held{true};
  std::atomic<int> answered{0}, withheld{0};
  for (int i = 0; i < 3; ++i) {
    CallRequest req;
    req.service = "svc";
    req.method = "POST";
    req.path = "/x";
    req.idempotency_key = "k" + std::to_string(i);
    req.may_write = [&] { return lease_held ? Status::Ok() : LeaseLost("lease gone"); };
    adapter->CallAsync(req, [&](CallResult r) {
      withheld += r.withheld;
      if (r.withheld) {
        EXPECT_EQ(r.outcome, Outcome::kNotExecuted);
      }
      ++answered;
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return arrived == 1; }));  // one in, two in line
  lease_held = false;                                    // the lease runs out meanwhile
  release = true;
  ASSERT_TRUE(WaitUntil([&] { return answered == 3; }));
  EXPECT_EQ(arrived, 1);  // the two in line never reached the downstream
  EXPECT_EQ(withheld, 2);
  adapter.reset();
  server.stop();
  t.join();
}
}  // namespace
}  // namespace sagad
