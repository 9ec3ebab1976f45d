// WebhookPublisher against a real HTTP receiver on loopback and a real LMDB
// outbox.
#include "coordinator/server/webhooks.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <mutex>
#include <thread>

#include "tests/testing/store_fixture.h"
#include "tests/testing/subprocess.h"

namespace sagad {
namespace {

// HMAC-SHA256 computed independently:
//   printf '%s' 'i1:7.1700000000.{"a":1}' | openssl dgst -sha256 -hmac s3cret
TEST(WebhookSignatureTest, IsHmacSha256OfIdTimestampAndBody) {
  EXPECT_EQ(WebhookSignature("s3cret", "i1:7", "1700000000", R"({"a":1})"),
            "v1=d78e1559b451dee1e7b3ff0cdeb240201929e11721a9ce7beeac7b04c6cd4f87");
}

class WebhookPublisherTest : public testing::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      received_.push_back(req);
      res.status = refuse_first_-- > 0 ? 500 : 204;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() before the loop runs would be lost, and TearDown would wait for ever.
    ASSERT_TRUE(testing::WaitFor([this] { return server_.is_running(); }));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }
  // Commits an instance whose creation puts `messages` in the outbox.
  void Outbox(const std::vector<nlohmann::json>& messages) {
    Event e;
    e.seq = 1;
    e.type = "instance_created";
    ASSERT_TRUE(store_
                    ->CreateInstance({{"id", "i1"}, {"version", 1}, {"status", "RUNNING"}}, {e},
                                     nullptr, messages, nullptr)
                    .ok());
  }
  size_t Received() {
    std::lock_guard<std::mutex> l(mu_);
    return received_.size();
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<httplib::Request> received_;
  int refuse_first_ = 0;
};

TEST_F(WebhookPublisherTest, DeliversInOrderSignedAndRemovesWhatWasTaken) {
  Outbox({{{"id", "i1:1"}, {"n", 1}}, {{"id", "i1:2"}, {"n", 2}}});
  WebhookPublisher publisher(
      *store_, {{"http://127.0.0.1:" + std::to_string(port_) + "/hook", "s3cret", 2000}});
  publisher.Start();
  publisher.Notify();
  ASSERT_TRUE(testing::WaitFor([&] { return Received() >= 2; }));
  ASSERT_TRUE(testing::WaitFor([&] { return *store_->OutboxSize() == 0u; }));
  publisher.Stop();
  std::lock_guard<std::mutex> l(mu_);
  ASSERT_EQ(received_.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const httplib::Request& r = received_[i];
    EXPECT_EQ(r.get_header_value("Webhook-Id"), "i1:" + std::to_string(i + 1));
    EXPECT_EQ(nlohmann::json::parse(r.body)["n"], i + 1);
    EXPECT_EQ(r.get_header_value("Webhook-Signature"),
              WebhookSignature("s3cret", r.get_header_value("Webhook-Id"),
                               r.get_header_value("Webhook-Timestamp"), r.body));
  }
}

TEST_F(WebhookPublisherTest, ARefusedDeliveryIsRetriedUntilTaken) {
  refuse_first_ = 2;
  Outbox({{{"id", "i1:1"}}});
  WebhookPublisher publisher(*store_,
                             {{"http://127.0.0.1:" + std::to_string(port_) + "/hook", "", 2000}});
  publisher.Start();
  publisher.Notify();
  ASSERT_TRUE(
      testing::WaitFor([&] { return *store_->OutboxSize() == 0u; }, std::chrono::seconds(20)));
  publisher.Stop();
  EXPECT_EQ(Received(), 3u);  // twice refused, then taken: at least once, never dropped
  std::lock_guard<std::mutex> l(mu_);
  EXPECT_FALSE(received_.back().has_header("Webhook-Signature"));  // no secret: unsigned
}

}  // namespace
}  // namespace sagad
