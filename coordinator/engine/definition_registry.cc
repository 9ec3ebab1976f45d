#include "coordinator/engine/definition_registry.h"

namespace sagad {

Status DefinitionRegistry::Register(const SagaDefinition& def) {
  SAGAD_RETURN_IF_ERROR(Validate(def));
  MutexLock l(mu_);
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

}  // namespace sagad
