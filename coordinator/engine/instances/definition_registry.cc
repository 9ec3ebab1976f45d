#include "coordinator/engine/instances/definition_registry.h"

namespace sagad {

Status DefinitionRegistry::Register(const SagaDefinition& def) {
  SAGAD_RETURN_IF_ERROR(Validate(def));
  MutexLock l(mu_);
  if (toolboxes_.count(def.name))
    return AlreadyExists("'" + def.name + "' names a toolbox; a saga needs another name");
  auto& versions = defs_[def.name];
  auto it = versions.find(def.version);
  if (it != versions.end()) {
    if (*it->second == def) return Status::Ok();
    return AlreadyExists("saga " + def.name + " version " + std::to_string(def.version) +
                         " is already registered with a different definition");
  }
  versions[def.version] = std::make_shared<const SagaDefinition>(def);
  return Status::Ok();
}

SagaDefinitionPtr DefinitionRegistry::Get(const std::string& name, int version) const {
  MutexLock l(mu_);
  auto it = defs_.find(name);
  if (it == defs_.end() || it->second.empty()) return nullptr;
  if (version <= 0) return it->second.rbegin()->second;
  auto v = it->second.find(version);
  return v == it->second.end() ? nullptr : v->second;
}

std::vector<SagaDefinitionPtr> DefinitionRegistry::All() const {
  MutexLock l(mu_);
  std::vector<SagaDefinitionPtr> out;
  for (const auto& [name, versions] : defs_)
    for (const auto& [v, d] : versions) out.push_back(d);
  return out;
}

Status DefinitionRegistry::RegisterToolbox(const ToolboxDefinition& tb) {
  SAGAD_RETURN_IF_ERROR(Validate(tb));
  MutexLock l(mu_);
  if (defs_.count(tb.name))
    return AlreadyExists("'" + tb.name + "' names a saga; a toolbox needs another name");
  auto& versions = toolboxes_[tb.name];
  auto it = versions.find(tb.version);
  if (it != versions.end()) {
    if (*it->second == tb) return Status::Ok();
    return AlreadyExists("toolbox " + tb.name + " version " + std::to_string(tb.version) +
                         " is already registered with a different definition");
  }
  versions[tb.version] = std::make_shared<const ToolboxDefinition>(tb);
  return Status::Ok();
}

ToolboxDefinitionPtr DefinitionRegistry::GetToolbox(const std::string& name, int version) const {
  MutexLock l(mu_);
  auto it = toolboxes_.find(name);
  if (it == toolboxes_.end() || it->second.empty()) return nullptr;
  if (version <= 0) return it->second.rbegin()->second;
  auto v = it->second.find(version);
  return v == it->second.end() ? nullptr : v->second;
}

bool DefinitionRegistry::FirstLook(const std::string& name, int version) {
  MutexLock l(mu_);
  return looked_at_.emplace(name, version).second;
}

std::vector<ToolboxDefinitionPtr> DefinitionRegistry::AllToolboxes() const {
  MutexLock l(mu_);
  std::vector<ToolboxDefinitionPtr> out;
  for (const auto& [name, versions] : toolboxes_)
    for (const auto& [v, d] : versions) out.push_back(d);
  return out;
}

}  // namespace sagad
