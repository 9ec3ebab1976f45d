// Event: one entry of an instance's log, as stored and as shown
// (sagas/instance.h).
#include "sagas/instance.h"
#include "util/json_limits.h"

namespace sagad {

nlohmann::json Event::ToJson() const {
  nlohmann::json j = {{"seq", seq}, {"at", at_ms}, {"type", type}};
  if (!step.empty()) j["step"] = step;
  if (!data.empty()) j["data"] = data;
  return j;
}

std::string Event::By() const {
  auto it = data.find("by");
  return it != data.end() && it->is_string() && !it->get<std::string>().empty()
             ? it->get<std::string>()
             : "sagad";
}

nlohmann::json Event::ViewJson() const {
  nlohmann::json j = ToJson();
  j["by"] = By();
  return j;
}

StatusOr<Event> Event::FromJson(const nlohmann::json& j) {
  Event e;
  try {
    if (!AsInt64(j.at("seq"), &e.seq) || !AsInt64(j.at("at"), &e.at_ms))
      return InvalidArgument("malformed event: seq and at must be integers");
    e.type = j.at("type").get<std::string>();
    e.step = j.value("step", std::string());
    e.data = j.value("data", nlohmann::json::object());
  } catch (const nlohmann::json::exception& ex) {
    return InvalidArgument(std::string("malformed event: ") + ex.what());
  }
  return e;
}

}  // namespace sagad
