#include "coordinator/server/webhooks.h"

#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <chrono>
#include <iostream>

#include "util/json_limits.h"
#include "util/thread_role.h"

namespace sagad {

std::string WebhookSignature(const std::string& secret, const std::string& id,
                             const std::string& timestamp, const std::string& body) {
  std::string data = id + "." + timestamp + "." + body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &len);
  static const char* kHex = "0123456789abcdef";
  std::string out = "v1=";
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

WebhookPublisher::WebhookPublisher(Store& store, std::vector<WebhookConfig> hooks)
    : store_(store), hooks_(std::move(hooks)) {}

WebhookPublisher::~WebhookPublisher() { Stop(); }

void WebhookPublisher::Start() {
  if (hooks_.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] {
    NameThread("sagad-webhooks");
    Run();
  });
}

void WebhookPublisher::Stop() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void WebhookPublisher::Notify() {
  {
    MutexLock l(mu_);
    pending_ = true;
  }
  cv_.NotifyAll();
}

bool WebhookPublisher::Deliver(const WebhookConfig& hook, const nlohmann::json& message) {
  size_t scheme = hook.url.find("://");
  size_t slash = hook.url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  std::string origin = slash == std::string::npos ? hook.url : hook.url.substr(0, slash);
  std::string path = slash == std::string::npos ? "/" : hook.url.substr(slash);
  httplib::Client cli(origin);
  time_t sec = hook.timeout_ms / 1000, usec = (hook.timeout_ms % 1000) * 1000;
  cli.set_connection_timeout(sec, usec);
  cli.set_read_timeout(sec, usec);
  std::string body = DumpJson(message);
  std::string id = message.value("id", "");
  std::string ts = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count());
  httplib::Headers headers = {{"Webhook-Id", id}, {"Webhook-Timestamp", ts}};
  if (!hook.secret.empty())
    headers.emplace("Webhook-Signature", WebhookSignature(hook.secret, id, ts, body));
  auto res = cli.Post(path, headers, body, "application/json");
  return res && res->status >= 200 && res->status < 300;
}

void WebhookPublisher::Run() {
  int64_t backoff_ms = 0;
  while (true) {
    {
      MutexLock l(mu_);
      auto wait = std::chrono::milliseconds(backoff_ms > 0 ? backoff_ms : 500);
      cv_.WaitFor(mu_, wait, [this, backoff_ms]() REQUIRES(mu_) {
        return stop_ || (pending_ && backoff_ms == 0);
      });
      if (stop_) return;
      pending_ = false;
    }
    auto batch = store_.PeekOutbox(100);
    if (!batch.ok()) {
      backoff_ms = 1000;
      continue;
    }
    bool failed = false;
    for (const OutboxRecord& rec : *batch) {
      for (const WebhookConfig& hook : hooks_) {
        if (!Deliver(hook, rec.message)) {
          failed = true;
          break;
        }
      }
      if (failed) break;
      if (!store_.AckOutbox(rec.seq).ok()) {
        failed = true;
        break;
      }
    }
    if (failed) {
      backoff_ms = std::min<int64_t>(backoff_ms == 0 ? 100 : backoff_ms * 2, 30000);
    } else {
      backoff_ms = 0;
      if (batch->size() == 100) Notify();  // more waiting
    }
  }
}

}  // namespace sagad
