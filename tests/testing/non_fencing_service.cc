#include "tests/testing/non_fencing_service.h"

#include <nlohmann/json.hpp>
#include <thread>

#include "coordinator/http/http_message.h"

namespace sagad::testing {

NonFencingService::NonFencingService(std::string path, int work_ms)
    : path_(std::move(path)),
      work_ms_(work_ms),
      server_([this](const RawRequest& r) { return Answer(r); }) {}

std::map<std::string, int> NonFencingService::Effects() {
  std::lock_guard<std::mutex> l(mu_);
  return effects_;
}

std::string NonFencingService::NotOnce(size_t keys) {
  std::string out;
  auto effects = Effects();
  if (effects.size() != keys)
    out = std::to_string(effects.size()) + " keys took effect, not " + std::to_string(keys) + "; ";
  for (const auto& [key, n] : effects)
    if (n != 1) out += key + ": " + std::to_string(n) + " times; ";
  return out;
}

RawReply NonFencingService::Answer(const RawRequest& r) {
  if (r.method == "GET" && r.path.rfind("/operations/", 0) == 0) {
    const std::string asked = PercentDecode(r.path.substr(12), false);
    std::lock_guard<std::mutex> l(mu_);
    auto it = effects_.find(asked);
    if (it == effects_.end() || it->second == 0) return RawAnswer(404, "{}");
    return RawAnswer(200, nlohmann::json{{"id", "R-" + asked}}.dump());
  }
  if (r.method == "POST" && r.path == path_) {
    size_t at = r.head.find("Idempotency-Key: ");
    std::string key =
        at == std::string::npos ? "" : r.head.substr(at + 17, r.head.find("\r\n", at) - at - 17);
    std::this_thread::sleep_for(std::chrono::milliseconds(work_ms_));  // the service's work
    std::lock_guard<std::mutex> l(mu_);
    ++effects_[key];
    return RawAnswer(201, nlohmann::json{{"id", "R-" + key}}.dump());
  }
  return RawAnswer(200, "{}");  // an undo
}

}  // namespace sagad::testing
