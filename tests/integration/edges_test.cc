// The edges, second probe: request smuggling, abandoned long
// polls, SIGHUP and drains, HTTP politeness, a truncated store. Each test
// failed on the code before its fix.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "tests/testing/cluster.h"
#include "tests/testing/rogue_downstream.h"

namespace sagad::testing {
namespace {

using nlohmann::json;

// A blocking connection to 127.0.0.1:port; -1 if none.
int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

bool SendAll(int fd, const std::string& s) {
  return send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

// Everything until the peer closes (or 10 s of silence).
std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

int StatusOf(const std::string& raw) {
  return raw.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(raw.c_str() + 9) : 0;
}

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

int OpenConnections(int port) {
  Reply m = Http(port, "GET", "/metrics");
  size_t at = m.raw.find("\nsagad_http_connections_open ");
  return at == std::string::npos ? -1 : std::atoi(m.raw.c_str() + at + 29);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class EdgesTest : public ::testing::Test {
 protected:
  int Start(json config = json::object(), json tokens = json::array()) {
    sagad_ =
        std::make_unique<Coordinator>(downstream_, dir_.path() + "/data", json::object(), tokens);
    sagad_->Configure(config);
    sagad_->LogTo(dir_.path() + "/sagad.log");
    return sagad_->Start();
  }
  // An order whose first call is held downstream: it stays RUNNING.
  std::string RunningInstance() {
    downstream_.Fault({{"path", "/reservations"}, {"action", "delay"}, {"delay_ms", 20000}});
    Reply o = sagad_->Submit("order_fulfilment", OrderInput());
    EXPECT_EQ(o.status, 201) << o.raw;
    return o.body.value("id", "");
  }

  TempDir dir_;
  Downstream downstream_;
  std::unique_ptr<Coordinator> sagad_;
};

// RFC 9112 6.1: a request whose last transfer coding is not chunked has no
// reliable end. It used to be read as bodiless, and what followed it was
// served as the next request (a smuggled GET /healthz got its 200).
TEST_F(EdgesTest, ATransferEncodingThatDoesNotEndInChunkedIsRefusedAndNothingAfterItIsServed) {
  ASSERT_GT(Start(), 0);
  for (const std::string te : {"gzip", "xchunked", "chunked, identity", "identity"}) {
    int fd = Connect(sagad_->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd,
                        "POST /v1/sagas/order_fulfilment/instances HTTP/1.1\r\nHost: localhost\r\n"
                        "Content-Type: application/json\r\nTransfer-Encoding: " +
                            te + "\r\n\r\nGET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    std::string raw = ReadAll(fd);
    close(fd);
    EXPECT_EQ(StatusOf(raw), 400) << te << ": " << raw;
    EXPECT_EQ(Count(raw, "HTTP/1.1 "), 1u) << te << ": the smuggled request was served: " << raw;
    EXPECT_NE(raw.find("Connection: close"), std::string::npos) << raw;
  }
  // Chunked after another coding: a coding sagad cannot undo, 501.
  int fd = Connect(sagad_->port());
  ASSERT_TRUE(SendAll(fd,
                      "POST /v1/sagas/order_fulfilment/instances HTTP/1.1\r\nHost: localhost\r\n"
                      "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"));
  std::string raw = ReadAll(fd);
  close(fd);
  EXPECT_EQ(StatusOf(raw), 501) << raw;
  // Plain chunked still works.
  fd = Connect(sagad_->port());
  std::string body = json{{"input", OrderInput()}}.dump();
  char size[16];
  snprintf(size, sizeof size, "%zx", body.size());
  ASSERT_TRUE(SendAll(fd,
                      "POST /v1/sagas/order_fulfilment/instances HTTP/1.1\r\nHost: localhost\r\n"
                      "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                      "Connection: close\r\n\r\n" +
                          std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n"));
  raw = ReadAll(fd);
  close(fd);
  EXPECT_EQ(StatusOf(raw), 201) << raw;
}

// A long poll whose client hangs up used to keep its connection slot (and
// its waiter) until the instance settled or wait ran out (300 s): 2,000 of
// them made every new request from that address a 503.
TEST_F(EdgesTest, AnAbandonedLongPollFreesItsConnectionSlotAtOnce) {
  ASSERT_GT(Start({{"api", {{"max_connections_per_client", 60}}}}), 0);
  std::string id = RunningInstance();
  std::vector<int> polls;
  for (int i = 0; i < 50; ++i) {
    int fd = Connect(sagad_->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(
        SendAll(fd, "GET /v1/instances/" + id + "?wait=300 HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    polls.push_back(fd);
  }
  ASSERT_TRUE(
      WaitFor([&] { return OpenConnections(sagad_->port()) >= 51; }, std::chrono::seconds(5)));
  for (int fd : polls) close(fd);
  int open = -1;
  EXPECT_TRUE(WaitFor([&] { return (open = OpenConnections(sagad_->port())) <= 2; },
                      std::chrono::seconds(3)))
      << open << " connections still open after their clients left";
  // And the slots are usable again: 55 more long polls fit under the cap.
  std::vector<int> more;
  for (int i = 0; i < 55; ++i) {
    int fd = Connect(sagad_->port());
    ASSERT_TRUE(
        SendAll(fd, "GET /v1/instances/" + id + "?wait=300 HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    more.push_back(fd);
  }
  ASSERT_TRUE(
      WaitFor([&] { return OpenConnections(sagad_->port()) >= 56; }, std::chrono::seconds(5)));
  EXPECT_EQ(Http(sagad_->port(), "GET", "/healthz").status, 200);
  for (int fd : more) close(fd);
}

// A submission that waits (?wait=) and whose client hangs up: its key is
// not left "in progress" (409 for ever); a replay gets the instance.
TEST_F(EdgesTest, AnAbandonedWaitingSubmissionLeavesItsKeyUsable) {
  ASSERT_GT(Start(), 0);
  downstream_.Fault({{"path", "/reservations"}, {"action", "delay"}, {"delay_ms", 20000}});
  std::string body = json{{"input", OrderInput()}}.dump();
  int fd = Connect(sagad_->port());
  ASSERT_TRUE(
      SendAll(fd,
              "POST /v1/sagas/order_fulfilment/instances?wait=300 HTTP/1.1\r\n"
              "Host: localhost\r\nContent-Type: application/json\r\nIdempotency-Key: k-1\r\n"
              "Content-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body));
  // Hang up only once the submission is stored (an open connection alone
  // does not mean the request was read yet).
  ASSERT_TRUE(WaitFor(
      [&] {
        Reply list = Http(sagad_->port(), "GET", "/v1/instances");
        return list.status == 200 && list.raw.find("order_fulfilment") != std::string::npos;
      },
      std::chrono::seconds(5)));
  close(fd);
  Reply replay;
  EXPECT_TRUE(WaitFor(
      [&] {
        replay = Http(sagad_->port(), "POST", "/v1/sagas/order_fulfilment/instances", body,
                      {{"Content-Type", "application/json"}, {"Idempotency-Key", "k-1"}});
        return replay.status == 201;
      },
      std::chrono::seconds(5)))
      << replay.status << " " << replay.raw;
  EXPECT_EQ(replay.header("Idempotent-Replayed"), "true") << replay.raw;
}

// SIGHUP used to kill sagad (exit 129, no drain). Now: a log line, nothing
// else; SIGTERM still drains, and a long poll in flight gets a 503 with
// Retry-After instead of a dropped connection.
TEST_F(EdgesTest, SighupIsIgnoredAndADrainAnswersLongPolls) {
  ASSERT_GT(Start(), 0);
  std::string id = RunningInstance();
  // The long poll goes first: by the time the SIGHUP is logged and a
  // health check answered, sagad has read it (an open connection alone did
  // not mean that: a SIGTERM right after the accept found no request yet).
  int fd = Connect(sagad_->port());
  ASSERT_TRUE(
      SendAll(fd, "GET /v1/instances/" + id + "?wait=60 HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  ASSERT_TRUE(
      WaitFor([&] { return OpenConnections(sagad_->port()) >= 2; }, std::chrono::seconds(5)));
  sagad_->process().Kill(SIGHUP);
  EXPECT_TRUE(WaitFor(
      [&] { return Slurp(dir_.path() + "/sagad.log").find("SIGHUP ignored") != std::string::npos; },
      std::chrono::seconds(5)));
  EXPECT_EQ(Http(sagad_->port(), "GET", "/healthz").status, 200);
  EXPECT_TRUE(sagad_->process().Running());
  sagad_->process().Kill(SIGTERM);
  std::string raw = ReadAll(fd);
  close(fd);
  EXPECT_EQ(StatusOf(raw), 503) << raw;
  EXPECT_NE(raw.find("Retry-After: "), std::string::npos) << raw;
  EXPECT_NE(raw.find("shutting down"), std::string::npos) << raw;
  EXPECT_EQ(sagad_->process().Wait(), 0);
}

// RFC 9110: the auth scheme is case-insensitive; HEAD is GET without the
// body; 100 Continue only for a known caller; other expectations 417. And
// what the API says when it refuses: the role needed, the parameter it does
// not know, a key given twice, a cursor it never issued; nosniff on every
// answer.
TEST_F(EdgesTest, HttpPoliteness) {
  json tokens = json::array({{{"name", "ops"}, {"token", "s3cret"}, {"role", "operator"}},
                             {{"name", "eyes"}, {"token", "l00k"}, {"role", "viewer"}}});
  ASSERT_GT(Start(json::object(), tokens), 0);
  const int port = sagad_->port();
  for (const std::string scheme : {"Bearer", "bearer", "BEARER"}) {
    Reply r = Http(port, "GET", "/v1/instances", "", {{"Authorization", scheme + " s3cret"}});
    EXPECT_EQ(r.status, 200) << scheme << ": " << r.raw;
    EXPECT_EQ(r.header("X-Content-Type-Options"), "nosniff") << r.raw;
  }
  Reply head = Http(port, "HEAD", "/healthz");
  EXPECT_EQ(head.status, 200) << head.raw;
  EXPECT_EQ(head.header("Content-Length"), "15") << head.raw;

  // 100-continue: an anonymous client is refused before it may upload.
  int fd = Connect(port);
  ASSERT_TRUE(SendAll(fd,
                      "POST /v1/sagas/order_fulfilment/instances HTTP/1.1\r\nHost: localhost\r\n"
                      "Content-Type: application/json\r\nExpect: 100-continue\r\n"
                      "Content-Length: 1000000\r\n\r\n"));
  std::string raw = ReadAll(fd);
  close(fd);
  EXPECT_EQ(StatusOf(raw), 401) << raw;
  EXPECT_EQ(raw.find("100 Continue"), std::string::npos) << raw;
  fd = Connect(port);
  std::string body = json{{"input", OrderInput()}}.dump();
  ASSERT_TRUE(SendAll(fd,
                      "POST /v1/sagas/order_fulfilment/instances HTTP/1.1\r\nHost: localhost\r\n"
                      "Authorization: Bearer s3cret\r\nContent-Type: application/json\r\n"
                      "Expect: 100-continue\r\nConnection: close\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n"));
  char first[64] = {0};
  ASSERT_GT(recv(fd, first, sizeof first - 1, 0), 0);
  EXPECT_EQ(std::string(first).rfind("HTTP/1.1 100 Continue", 0), 0u) << first;
  ASSERT_TRUE(SendAll(fd, body));
  raw = ReadAll(fd);
  close(fd);
  EXPECT_NE(raw.find("HTTP/1.1 201"), std::string::npos) << raw;
  fd = Connect(port);
  ASSERT_TRUE(
      SendAll(fd, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nExpect: something-else\r\n\r\n"));
  raw = ReadAll(fd);
  close(fd);
  EXPECT_EQ(StatusOf(raw), 417) << raw;

  const std::map<std::string, std::string> ops = {{"Authorization", "Bearer s3cret"},
                                                  {"Content-Type", "application/json"}};
  Reply viewer = Http(port, "POST", "/v1/sagas/order_fulfilment/instances",
                      json{{"input", OrderInput()}}.dump(),
                      {{"Authorization", "Bearer l00k"}, {"Content-Type", "application/json"}});
  EXPECT_EQ(viewer.status, 403) << viewer.raw;
  EXPECT_NE(viewer.body.value("detail", "").find("needs role submitter"), std::string::npos)
      << viewer.raw;
  Reply twice = Http(port, "POST", "/v1/sagas/order_fulfilment/instances",
                     R"({"input": {"order_id": "a"}, "input": {"order_id": "b"}})", ops);
  EXPECT_EQ(twice.status, 400) << twice.raw;
  EXPECT_NE(twice.body.value("detail", "").find("/input"), std::string::npos) << twice.raw;
  Reply unknown = Http(port, "GET", "/v1/instances?limt=5&status=RUNNING", "", ops);
  EXPECT_EQ(unknown.status, 400) << unknown.raw;
  EXPECT_NE(unknown.body.value("detail", "").find("'limt'"), std::string::npos) << unknown.raw;
  EXPECT_EQ(Http(port, "GET", "/v1/instances?cursor=zzzz", "", ops).status, 400);
  EXPECT_EQ(Http(port, "GET", "/healthz?x=1").status, 400);
  Reply reused = Http(port, "POST", "/v1/sagas/order_fulfilment/instances",
                      json{{"input", OrderInput()}}.dump(),
                      {{"Authorization", "Bearer s3cret"},
                       {"Content-Type", "application/json"},
                       {"Idempotency-Key", "same"}});
  ASSERT_EQ(reused.status, 201) << reused.raw;
  json other = OrderInput();
  other["order_id"] = "another";
  Reply clash =
      Http(port, "POST", "/v1/sagas/order_fulfilment/instances", json{{"input", other}}.dump(),
           {{"Authorization", "Bearer s3cret"},
            {"Content-Type", "application/json"},
            {"Idempotency-Key", "same"}});
  EXPECT_EQ(clash.status, 422) << clash.raw;
  EXPECT_NE(clash.body.value("detail", "").find(reused.body.value("id", "?")), std::string::npos)
      << clash.raw;
}

// Every family docs/operations.md documents is exported from the first scrape,
// and the HELP text does not name a store that is not in use.
TEST_F(EdgesTest, EveryDocumentedMetricIsThereFromTheStart) {
  ASSERT_GT(Start(), 0);
  std::string m = Http(sagad_->port(), "GET", "/metrics").raw;
  for (const char* family :
       {"sagad_recovery_latency_seconds_count 0", "# TYPE sagad_retry_budget_exhausted_total",
        "sagad_step_latency_seconds_count 0", "# TYPE sagad_store_commit_seconds histogram"})
    EXPECT_NE(m.find(family), std::string::npos) << family;
  EXPECT_EQ(m.find("LMDB write transactions"), std::string::npos);
}

// A downstream that is not there: last_error says where and what.
TEST_F(EdgesTest, ANotSentCallSaysWhereAndWhy) {
  sagad_ = std::make_unique<Coordinator>(
      downstream_, dir_.path() + "/data",
      json{{"inventory",
            {{"base_url", "http://127.0.0.1:" + std::to_string(FreePort())},
             {"retry", {{"max_attempts", 1}}}}}});
  ASSERT_GT(sagad_->Start(), 0);
  Reply r = sagad_->Submit("order_fulfilment", OrderInput(), 10);
  json events = Events(*sagad_, r.body.value("id", ""));
  std::string all = events.dump();
  EXPECT_NE(all.find("not sent: cannot connect to http://127.0.0.1:"), std::string::npos) << all;
  EXPECT_NE(all.find("connection refused"), std::string::npos) << all;
}

// A data.mdb shorter than its meta page says used to kill sagad with SIGBUS
// on the first read; now sagad exits 1 with one line naming the file, and
// sagactl says the same.
TEST_F(EdgesTest, ATruncatedDataFileStopsSagadWithAMessage) {
  if (const char* s = std::getenv("SAGAD_TEST_STORE"); s && std::string(s) == "postgres")
    GTEST_SKIP() << "an LMDB file";
  ASSERT_GT(Start(), 0);
  for (int i = 0; i < 30; ++i) sagad_->Submit("order_fulfilment", OrderInput());
  ASSERT_EQ(sagad_->Terminate(), 0);
  const std::string file = dir_.path() + "/data/data.mdb";
  ASSERT_EQ(truncate(file.c_str(), 3 * 4096), 0);
  EXPECT_LT(sagad_->Start(), 0);
  EXPECT_EQ(sagad_->process().Wait(), 1);
  std::string log = Slurp(dir_.path() + "/sagad.log");
  EXPECT_NE(log.find(file + " is truncated"), std::string::npos) << log;
  Subprocess ctl({SAGACTL_BIN, "inspect", "--data-dir", dir_.path() + "/data"}, {},
                 dir_.path() + "/sagactl.log");
  EXPECT_EQ(ctl.Wait(), 1);
  EXPECT_NE(Slurp(dir_.path() + "/sagactl.log").find("is truncated"), std::string::npos);
}

// A crash point the variable misspells would let a crash test pass without
// a crash: sagad refuses to start, naming the variable and the points.
TEST_F(EdgesTest, AMisspeltCrashPointStopsSagadAtStart) {
  Subprocess sagad({SAGAD_BIN, "--data-dir", dir_.path() + "/data", "--listen", "127.0.0.1:0"},
                   {{"SAGA_CRASH_AT", "after_startd:2"}}, dir_.path() + "/crash.log");
  EXPECT_EQ(sagad.Wait(), 2);
  const std::string log = Slurp(dir_.path() + "/crash.log");
  EXPECT_NE(log.find("SAGA_CRASH_AT names no crash point 'after_startd'"), std::string::npos)
      << log;
  EXPECT_NE(log.find("after_started"), std::string::npos) << log;
}

// At the default level a saga that goes well writes nothing to the log:
// every step of every saga is debug. --log-level debug tells each step and
// says its level; a level that does not exist is refused naming the flag.
TEST_F(EdgesTest, TheDefaultLogKeepsQuietAboutWhatWentWell) {
  ASSERT_GT(Start(), 0);
  const std::string log = dir_.path() + "/sagad.log";
  const size_t before = Slurp(log).size();
  for (int i = 0; i < 5; ++i) {
    Reply o = sagad_->Submit("order_fulfilment", OrderInput());
    ASSERT_EQ(o.status, 201) << o.raw;
    EXPECT_EQ(sagad_->WaitStatus(o.body["id"], "COMPLETED")["status"], "COMPLETED");
  }
  std::string quiet = Slurp(log).substr(before);
  // A call that went as asked says nothing (one that timed out on a loaded
  // machine, a sanitizer's, is not what went well: it may speak).
  std::istringstream lines(quiet);
  for (std::string line; std::getline(lines, line);)
    EXPECT_FALSE(line.find("\"step call\"") != std::string::npos &&
                 line.find("\"outcome\":\"committed\"") != std::string::npos)
        << line;
  EXPECT_EQ(quiet.find("\"instance created\""), std::string::npos) << quiet;
  sagad_->Kill();

  sagad_->AddArgs({"--log-level", "debug"});
  ASSERT_GT(sagad_->Start(), 0);
  const size_t from = Slurp(log).size();
  Reply o = sagad_->Submit("order_fulfilment", OrderInput());
  ASSERT_EQ(o.status, 201) << o.raw;
  ASSERT_EQ(sagad_->WaitStatus(o.body["id"], "COMPLETED")["status"], "COMPLETED");
  std::string told = Slurp(log).substr(from);
  EXPECT_EQ(Count(told, "\"msg\":\"step call\""), 3u) << told;
  EXPECT_NE(told.find("\"level\":\"debug\""), std::string::npos) << told;
  sagad_->Kill();

  const std::string err = dir_.path() + "/bad.err";
  Subprocess bad({SAGAD_BIN, "--log-level", "loud"}, {}, err);
  EXPECT_EQ(bad.Wait(), 2);
  EXPECT_NE(Slurp(err).find("--log-level must be one of"), std::string::npos) << Slurp(err);
}

}  // namespace
}  // namespace sagad::testing
