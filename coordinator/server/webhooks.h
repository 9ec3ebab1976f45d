// WebhookPublisher: delivers the transactional outbox to the configured
// webhook URLs, at least once and in commit order (hence in order per
// instance): the head record is retried with backoff until every URL took it
// (2xx), then removed. Each POST carries the JSON message with
//   Webhook-Id: <instance>:<event seq>   (stable across retries and restarts)
//   Webhook-Timestamp: <unix seconds>
//   Webhook-Signature: v1=<hex HMAC-SHA256(secret, id + "." + timestamp + "." + body)>
//     (only when the webhook has a secret)
// Thread-safety: Notify may be called from any thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/store/store.h"

namespace sagad {

struct WebhookConfig {
  std::string url;     // http://host:port/path
  std::string secret;  // empty: unsigned
  int timeout_ms = 5000;
};

// "v1=" + hex HMAC-SHA256 over id.timestamp.body.
std::string WebhookSignature(const std::string& secret, const std::string& id,
                             const std::string& timestamp, const std::string& body);

class WebhookPublisher {
 public:
  WebhookPublisher(Store& store, std::vector<WebhookConfig> hooks);
  ~WebhookPublisher();  // stops
  void Start();
  void Stop();
  // Something was committed to the outbox: look now.
  void Notify();

 private:
  void Run();
  bool Deliver(const WebhookConfig& hook, const nlohmann::json& message);

  Store& store_;
  std::vector<WebhookConfig> hooks_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool pending_ = false;
  std::thread thread_;
};

}  // namespace sagad
