// Engine::Impl: downstream services (ServiceGates): their view, an
// operator's pause and resume, and the steps that wait for a permit.
#include "coordinator/engine/engine_impl.h"

namespace sagad {

namespace {

nlohmann::json ViewJson(const ServiceGates::View& v, const nlohmann::json& notes) {
  auto note = notes.find(v.name);
  return {{"name", v.name},
          {"max_in_flight", v.max_in_flight > 0 ? nlohmann::json(v.max_in_flight) : nullptr},
          {"max_per_second", v.max_per_second > 0 ? nlohmann::json(v.max_per_second) : nullptr},
          {"max_connections", v.max_connections},
          {"paused", v.paused},
          {"pause", v.paused && note != notes.end() ? *note : nlohmann::json()},
          {"in_flight", v.in_flight},
          {"queued", v.queued}};
}

}  // namespace

// Who paused each service, why and since when: read from the store (another
// coordinator may have paused it); none when the store cannot say now.
auto Engine::Impl::PauseNotes() -> nlohmann::json {
  auto notes = store_.PauseNotes();
  return notes.ok() ? *notes : nlohmann::json::object();
}

auto Engine::Impl::Services() -> nlohmann::json {
  nlohmann::json out = nlohmann::json::array();
  const nlohmann::json notes = PauseNotes();
  for (const auto& v : gates_.Views()) out.push_back(ViewJson(v, notes));
  return out;
}

auto Engine::Impl::PauseServiceAsync(const std::string& service, bool paused,
                                     const std::string& actor, const std::string& reason,
                                     Completion<StatusOr<nlohmann::json>> done) -> void {
  if (!adapter_.Service(service))
    return done(NotFound("no service '" + service + "' is configured"));
  const nlohmann::json note = {{"by", actor}, {"reason", reason}, {"since", clock_.NowMillis()}};
  store_.SetServicePausedAsync(
      service, paused, note,
      [this, service, paused, actor, reason, done = std::move(done)](Status stored) {
        done(Paused(service, paused, actor, reason, stored));
      });
}

auto Engine::Impl::Paused(const std::string& service, bool paused, const std::string& actor,
                          const std::string& reason, const Status& stored)
    -> StatusOr<nlohmann::json> {
  SAGAD_RETURN_IF_ERROR(stored);
  gates_.Pause(service, paused);
  EngineLog({{"msg", paused ? "service paused" : "service resumed"},
             {"service", service},
             {"by", actor},
             {"reason", reason}});
  const nlohmann::json notes = PauseNotes();
  for (const auto& v : gates_.Views())
    if (v.name == service) return ViewJson(v, notes);
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
