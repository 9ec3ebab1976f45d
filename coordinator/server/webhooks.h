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

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/server/config.h"
#include "coordinator/store/store.h"
#include "util/mutex.h"

namespace sagad {

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
  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  bool pending_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sagad
