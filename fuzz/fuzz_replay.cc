// libFuzzer: replaying an event log (a JSON array of events) through the
// MSM machines. Never a crash; a log that replays gives an instance whose
// view prints.
#include <cstdint>
#include <string>
#include <vector>

#include "sagas/instance.h"
#include "util/json_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (!sagad::JsonDepthWithin(text)) return 0;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_array()) return 0;
  std::vector<sagad::Event> events;
  for (const auto& e : j) {
    auto ev = sagad::Event::FromJson(e);
    if (!ev.ok()) return 0;
    events.push_back(*ev);
  }
  auto inst = sagad::Instance::Replay("fuzz", events);
  if (inst.ok()) (void)sagad::DumpJson(inst->ToJson());
  return 0;
}
