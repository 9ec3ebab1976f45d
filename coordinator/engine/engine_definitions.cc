// Engine::Impl: saga definitions deployed over the API, stored in the store
// so that every coordinator of it runs the same definition of a version.
#include "coordinator/engine/engine_impl.h"

namespace sagad {

namespace {
// Declares `fields` of `name` to the store; a refusal is logged (lists
// keep answering by a bounded scan).
void DeclareSearchAttributes(Store& store, const std::string& name,
                             const std::vector<std::string>& fields) {
  if (fields.empty()) return;
  store.DeclareSearchAttributesAsync(name, fields, [name](Status s) {
    if (!s.ok())
      EngineLog(
          LogLevel::kError,
          {{"msg", "search attributes not indexed"}, {"saga", name}, {"error", s.ToString()}});
  });
}
}  // namespace

auto Engine::Impl::Register(const SagaDefinition& def) -> Status {
  SAGAD_RETURN_IF_ERROR(defs_.Register(def));
  DeclareSearchAttributes(store_, def.name, def.search_attributes);
  return Status::Ok();
}

auto Engine::Impl::RegisterToolbox(const ToolboxDefinition& tb) -> Status {
  SAGAD_RETURN_IF_ERROR(defs_.RegisterToolbox(tb));
  DeclareSearchAttributes(store_, tb.name, tb.search_attributes);
  return Status::Ok();
}

// A call's service is configured, and as what the call takes it for (an
// MCP server, or an HTTP service).
auto Engine::Impl::Configured(const CallSpec& call) const -> bool {
  const ServiceConfig* svc = adapter_.Service(call.service);
  return svc && svc->mcp == call.IsMcp();
}

auto Engine::Impl::ServicesConfigured(const SagaDefinition& def) const -> Status {
  const StepDefinition* st = nullptr;
  const CallSpec* c = FirstUnconfiguredCall(
      def, [this](const CallSpec& call) { return Configured(call); }, &st);
  if (!c) return Status::Ok();
  return InvalidArgument("saga '" + def.name + "' step '" + st->name + "' calls " + CalleeText(*c) +
                         ", which is not configured");
}

auto Engine::Impl::PrepareDeploy(const std::string& name, int version, const nlohmann::json& body,
                                 const std::string& actor) -> StatusOr<Deployment> {
  if (!body.is_object()) return InvalidArgument("a saga definition must be a JSON object");
  nlohmann::json j = body;
  if (j.contains("name") && j["name"] != name)
    return InvalidArgument("the definition names saga " + j["name"].dump() + ", the path '" + name +
                           "'");
  if (j.contains("version") && j["version"] != version)
    return InvalidArgument("the definition says version " + j["version"].dump() + ", the path " +
                           std::to_string(version));
  j["name"] = name;
  j["version"] = version;
  Deployment d{name, version, actor, nlohmann::json(), nullptr, nullptr};
  if (IsToolboxJson(j)) {
    SAGAD_RETURN_IF_ERROR(PrepareToolbox(j, &d));
    return d;
  }
  auto def = SagaDefinition::FromJson(j);
  if (!def.ok()) return InvalidArgument(def.status().message());
  SAGAD_RETURN_IF_ERROR(ServicesConfigured(*def));
  if (defs_.GetToolbox(name, 0))
    return AlreadyExists("'" + name + "' names a toolbox; a saga needs another name");
  d.canonical = def->ToJson();
  if (SagaDefinitionPtr here = defs_.Get(name, version);
      here && here->version == version && here->ToJson() != d.canonical)
    return AlreadyExists("saga '" + name + "' version " + std::to_string(version) +
                         " is registered with another definition; deploy a new version");
  d.saga = std::make_shared<const SagaDefinition>(std::move(*def));
  return d;
}

auto Engine::Impl::PrepareToolbox(const nlohmann::json& j, Deployment* d) -> Status {
  auto tb = ToolboxDefinition::FromJson(j);
  if (!tb.ok()) return InvalidArgument(tb.status().message());
  SAGAD_RETURN_IF_ERROR(ToolboxServicesConfigured(*tb));
  if (defs_.Get(d->name, 0))
    return AlreadyExists("'" + d->name + "' names a saga; a toolbox needs another name");
  d->canonical = tb->ToJson();
  if (ToolboxDefinitionPtr here = defs_.GetToolbox(d->name, d->version);
      here && here->ToJson() != d->canonical)
    return AlreadyExists("toolbox '" + d->name + "' version " + std::to_string(d->version) +
                         " is registered with another definition; deploy a new version");
  d->toolbox = std::make_shared<const ToolboxDefinition>(std::move(*tb));
  return Status::Ok();
}

auto Engine::Impl::Deployed(const Deployment& d, const StatusOr<bool>& stored) -> StatusOr<bool> {
  if (!stored.ok()) return stored.status();
  SAGAD_RETURN_IF_ERROR(d.saga ? Register(*d.saga) : RegisterToolbox(*d.toolbox));
  const char* what = d.saga ? (*stored ? "definition deployed" : "definition deployed again")
                            : (*stored ? "toolbox deployed" : "toolbox deployed again");
  EngineLog({{"msg", what},
             {d.saga ? "saga" : "toolbox", d.name},
             {"version", d.version},
             {"by", d.actor}});
  return *stored;
}

auto Engine::Impl::DeployAsync(const std::string& name, int version, const nlohmann::json& body,
                               const std::string& actor, Completion<StatusOr<bool>> done) -> void {
  auto d = PrepareDeploy(name, version, body, actor);
  if (!d.ok()) return done(d.status());
  auto ready = std::make_shared<const Deployment>(std::move(*d));
  store_.PutDefinitionAsync(name, version, ready->canonical,
                            [this, ready, done = std::move(done)](StatusOr<bool> stored) {
                              done(Deployed(*ready, stored));
                            });
}

auto Engine::Impl::ToolboxServicesConfigured(const ToolboxDefinition& tb) const -> Status {
  const ToolDefinition* t = nullptr;
  const CallSpec* c = FirstUnconfiguredCall(
      tb, [this](const CallSpec& call) { return Configured(call); }, &t);
  if (!c) return Status::Ok();
  return InvalidArgument("toolbox '" + tb.name + "' tool '" + t->name() + "' calls " +
                         CalleeText(*c) + ", which is not configured");
}

// A stored toolbox: registered here unless this process has it already.
auto Engine::Impl::LoadToolbox(const StoredDefinition& d) -> Status {
  ToolboxDefinitionPtr here = defs_.GetToolbox(d.name, d.version);
  if (here && here->ToJson() == d.body) return Status::Ok();
  auto tb = ToolboxDefinition::FromJson(d.body);
  Status s = !tb.ok() ? tb.status()
             : here
                 ? AlreadyExists("toolbox '" + d.name + "' version " + std::to_string(d.version) +
                                 " is deployed with another definition than the one given "
                                 "here (a file or C++)")
                 : ToolboxServicesConfigured(*tb);
  return s.ok() ? RegisterToolbox(*tb) : s;
}

auto Engine::Impl::LoadDeployed(bool starting) -> Status {
  auto deployed = store_.ListDefinitions();
  if (!deployed.ok()) return deployed.status();
  for (const StoredDefinition& d : *deployed) {
    const std::string key = d.name + "@" + std::to_string(d.version);
    if (!defs_.FirstLook(d.name, d.version)) continue;  // decided at an earlier round
    if (IsToolboxJson(d.body)) {
      Status s = LoadToolbox(d);
      if (s.ok()) continue;
      if (starting && s.code() == StatusCode::kAlreadyExists) return s;
      EngineLog(
          LogLevel::kError,
          {{"msg", "deployed toolbox not loaded"}, {"toolbox", key}, {"error", s.ToString()}});
      continue;
    }
    SagaDefinitionPtr here = defs_.Get(d.name, d.version);
    if (here && here->version == d.version && here->ToJson() == d.body) continue;
    auto def = SagaDefinition::FromJson(d.body);
    Status s = !def.ok() ? def.status()
               : here && here->version == d.version
                   ? AlreadyExists("saga '" + d.name + "' version " + std::to_string(d.version) +
                                   " is deployed with another definition than the one given "
                                   "here (a file or C++)")
                   : ServicesConfigured(*def);
    if (s.ok()) s = Register(*def);
    if (s.ok()) continue;
    if (starting && s.code() == StatusCode::kAlreadyExists) return s;
    EngineLog(LogLevel::kError,
              {{"msg", "deployed definition not loaded"}, {"saga", key}, {"error", s.ToString()}});
  }
  return Status::Ok();
}

}  // namespace sagad
