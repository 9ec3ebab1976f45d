// Engine::Impl: downstream services (ServiceGates): their view, an
// operator's pause and resume, and the steps that wait for a permit.
#include "coordinator/engine/engine_impl.h"

namespace sagad {

namespace {

nlohmann::json ViewJson(const ServiceGates::View& v) {
  return {{"name", v.name},
          {"max_in_flight", v.max_in_flight > 0 ? nlohmann::json(v.max_in_flight) : nullptr},
          {"max_per_second", v.max_per_second > 0 ? nlohmann::json(v.max_per_second) : nullptr},
          {"max_connections", v.max_connections},
          {"paused", v.paused},
          {"in_flight", v.in_flight},
          {"queued", v.queued}};
}

}  // namespace

auto Engine::Impl::Services() -> nlohmann::json {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : gates_.Views()) out.push_back(ViewJson(v));
  return out;
}

auto Engine::Impl::PauseService(const std::string& service, bool paused, const std::string& actor)
    -> StatusOr<nlohmann::json> {
  if (!adapter_.Service(service)) return NotFound("no service '" + service + "' is configured");
  SAGAD_RETURN_IF_ERROR(store_.SetServicePaused(service, paused));
  gates_.Pause(service, paused);
  EngineLog({{"msg", paused ? "service paused" : "service resumed"},
             {"service", service},
             {"by", actor}});
  for (const auto& v : gates_.Views())
    if (v.name == service) return ViewJson(v);
  return NotFound("no service '" + service + "' is configured");
}

auto Engine::Impl::RefreshPaused() -> Status {
  auto paused = store_.PausedServices();
  if (!paused.ok()) return paused.status();
  gates_.SetPaused(*paused);
  return Status::Ok();
}

auto Engine::Impl::AnnotateWaits(nlohmann::json* view) -> void {
  const std::string id = view->value("id", "");
  auto steps = view->find("steps");
  if (steps == view->end() || !steps->is_array()) return;
  for (auto& st : *steps) {
    std::string service = gates_.WaitingFor(id, st.value("name", ""));
    if (!service.empty()) st["waiting_for"] = service;
  }
}

}  // namespace sagad
