// sagad::Client (coordinator/client/client.h) against a real sagad: typed
// calls, errors as Status codes with the problem's detail, and a submission
// whose reply is lost on the way back re-sent with the same key (one
// instance, not two).
#include "coordinator/client/client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "tests/testing/cluster.h"
#include "tests/testing/subprocess.h"

namespace sagad::testing {
namespace {

using nlohmann::json;

// Reads one HTTP message (headers and a Content-Length body) from `fd`.
std::string ReadMessage(int fd) {
  std::string data;
  char buf[4096];
  size_t need = std::string::npos;
  while (need == std::string::npos || data.size() < need) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
    size_t end = data.find("\r\n\r\n");
    if (need == std::string::npos && end != std::string::npos) {
      size_t len = 0;
      size_t at = data.find("Content-Length: ");
      if (at == std::string::npos) at = data.find("content-length: ");
      if (at != std::string::npos && at < end) len = std::stoul(data.substr(at + 16));
      need = end + 4 + len;
    }
  }
  return data;
}

// A TCP relay in front of sagad that passes every request on and drops the
// reply of the first one: the request took effect, the caller never hears.
class LossyRelay {
 public:
  explicit LossyRelay(int upstream_port) : upstream_(upstream_port) {
    listen_ = ListenOnLoopback(&port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~LossyRelay() {
    shutdown(listen_, SHUT_RDWR);
    close(listen_);
    thread_.join();
  }
  int port() const { return port_; }
  int requests() const { return requests_; }

 private:
  void Serve() {
    while (true) {
      int c = accept(listen_, nullptr, nullptr);
      if (c < 0) return;
      std::string request = ReadMessage(c);
      int u = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(upstream_));
      if (connect(u, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
        send(u, request.data(), request.size(), MSG_NOSIGNAL);
        std::string reply = ReadMessage(u);
        if (++requests_ > 1) send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      }
      close(u);
      close(c);
    }
  }
  int upstream_, listen_ = -1, port_ = 0;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    json tokens = json::array({{{"name", "alice"}, {"token", "op-1"}, {"role", "operator"}},
                               {{"name", "victor"}, {"token", "view-1"}, {"role", "viewer"}}});
    sagad_ =
        std::make_unique<Coordinator>(downstream_, dir_.path() + "/data", json::object(), tokens);
    ASSERT_GT(sagad_->Start(), 0);
  }
  Client Make(const std::string& token = "op-1", int port = 0) {
    ClientOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(port ? port : sagad_->port());
    o.token = token;
    return Client(o);
  }
  TempDir dir_;
  Downstream downstream_;
  std::unique_ptr<Coordinator> sagad_;
};

TEST_F(ClientTest, SubmitsWaitsListsAndActs) {
  Client c = Make();
  json input = OrderInput();
  input["customer"] = "client-7";
  auto first = c.Submit("order_fulfilment", input, "client-key-1", 10);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto again = c.Submit("order_fulfilment", input, "client-key-1");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)["id"], (*first)["id"]);
  auto done = c.Wait((*first)["id"], 10);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ((*done)["status"], "COMPLETED");
  ListQuery q;
  q.input["customer"] = "client-7";
  auto found = c.List(q);
  ASSERT_TRUE(found.ok());
  ASSERT_EQ((*found)["instances"].size(), 1u);
  EXPECT_EQ((*found)["instances"][0]["id"], (*first)["id"]);
  auto events = c.Events((*first)["id"]);
  ASSERT_TRUE(events.ok());
  EXPECT_GT((*events)["events"].size(), 3u);

  auto incident = c.Submit("incident_response", IncidentInput(), "", 10);
  ASSERT_TRUE(incident.ok());
  ASSERT_EQ((*incident)["status"], "AWAITING_APPROVAL");
  // An irreversible step is never approved in bulk; it is approved as seen.
  auto bulk = c.Bulk("approve", {{"ids", {(*incident)["id"]}}}, "by the client");
  ASSERT_TRUE(bulk.ok()) << bulk.status().ToString();
  EXPECT_EQ((*bulk)["results"][0]["http_status"], 409);
  auto cards = c.Approvals();
  ASSERT_TRUE(cards.ok());
  auto seen = c.ApproveSeen((*cards)["approvals"], "by the client");
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ((*seen)["results"][0]["http_status"], 200);
  auto services = c.Services();
  ASSERT_TRUE(services.ok());
  EXPECT_FALSE((*services)["services"].empty());
}

TEST_F(ClientTest, RefusalsAreStatusCodesWithTheProblemsDetail) {
  Client c = Make();
  auto inst = c.Submit("incident_response", IncidentInput(), "", 10);
  ASSERT_TRUE(inst.ok());
  const std::string id = (*inst)["id"];

  auto unknown = c.Approve(id, "no_such_step");
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().message().rfind("404 Not Found: ", 0), 0u)
      << unknown.status().message();
  EXPECT_NE(unknown.status().message().find("no_such_step"), std::string::npos);

  auto early = c.Approve(id, "create_ticket");
  EXPECT_EQ(early.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(early.status().message().find("not awaiting approval"), std::string::npos)
      << early.status().message();

  auto viewer = Make("view-1").Approve(id, "notify_user");
  EXPECT_EQ(viewer.status().code(), StatusCode::kPermissionDenied) << viewer.status().ToString();
  auto nobody = Make("wrong").Get(id);
  EXPECT_EQ(nobody.status().code(), StatusCode::kPermissionDenied);

  auto bad_input = c.Submit("order_fulfilment", json::object());
  EXPECT_EQ(bad_input.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.Get("..").status().code(), StatusCode::kInvalidArgument);

  ClientOptions ftp;
  ftp.url = "ftp://127.0.0.1";
  EXPECT_EQ(Client(ftp).Get(id).status().code(), StatusCode::kInvalidArgument);
  ClientOptions closed;
  closed.url = "http://127.0.0.1:1";
  closed.submit_attempts = 2;
  auto down = Client(closed).Submit("order_fulfilment", OrderInput());
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(down.status().message().find("cannot reach sagad"), std::string::npos);
}

// The first reply is lost after sagad created the instance: the client sends
// the submission again with the same Idempotency-Key and gets that instance.
TEST_F(ClientTest, ASubmissionWhoseReplyIsLostIsResentWithTheSameKey) {
  LossyRelay relay(sagad_->port());
  json input = OrderInput();
  input["customer"] = "lost-reply";
  auto inst = Make("op-1", relay.port()).Submit("order_fulfilment", input);
  ASSERT_TRUE(inst.ok()) << inst.status().ToString();
  EXPECT_EQ(relay.requests(), 2);
  ListQuery q;
  q.input["customer"] = "lost-reply";
  auto found = Make().List(q);
  ASSERT_TRUE(found.ok());
  ASSERT_EQ((*found)["instances"].size(), 1u) << found->dump();
  EXPECT_EQ((*found)["instances"][0]["id"], (*inst)["id"]);
}

}  // namespace
}  // namespace sagad::testing
