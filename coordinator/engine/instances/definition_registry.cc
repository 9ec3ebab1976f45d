#include "coordinator/engine/instances/definition_registry.h"

#include <atomic>

namespace sagad {

namespace {
// The newest version in `versions` when `version` <= 0, else that one.
template <typename Ptr>
Ptr Find(const std::map<std::string, std::map<int, Ptr>>& table, const std::string& name,
         int version) {
  auto it = table.find(name);
  if (it == table.end() || it->second.empty()) return nullptr;
  if (version <= 0) return it->second.rbegin()->second;
  auto v = it->second.find(version);
  return v == it->second.end() ? nullptr : v->second;
}

template <typename Ptr>
std::vector<Ptr> Flatten(const std::map<std::string, std::map<int, Ptr>>& table) {
  std::vector<Ptr> out;
  for (const auto& [name, versions] : table)
    for (const auto& [v, d] : versions) out.push_back(d);
  return out;
}

// Adds `def` (a `kind`) to `table` as name / version unless it is there
// already: AlreadyExists if it is there, different, or if the name is one of
// `other` (the other kind's table: one name space).
template <typename Def, typename Other>
Status Add(std::map<std::string, std::map<int, std::shared_ptr<const Def>>>& table,
           const Other& other, const Def& def, const char* kind, const char* other_kind,
           bool* changed) {
  if (other.count(def.name))
    return AlreadyExists("'" + def.name + "' names a " + other_kind + "; a " + kind +
                         " needs another name");
  auto& versions = table[def.name];
  auto it = versions.find(def.version);
  if (it != versions.end()) {
    *changed = false;
    if (*it->second == def) return Status::Ok();
    return AlreadyExists(std::string(kind) + " " + def.name + " version " +
                         std::to_string(def.version) +
                         " is already registered with a different definition");
  }
  versions[def.version] = std::make_shared<const Def>(def);
  return Status::Ok();
}
}  // namespace

auto DefinitionRegistry::Current() const -> TablesPtr { return std::atomic_load(&tables_); }

Status DefinitionRegistry::Update(const std::function<Status(Tables&, bool* changed)>& change) {
  TablesPtr now = Current();
  while (true) {
    auto next = std::make_shared<Tables>(*now);
    bool changed = true;
    Status s = change(*next, &changed);
    if (!s.ok() || !changed) return s;
    // On failure `now` becomes the newer tables, and the change is made again.
    if (std::atomic_compare_exchange_weak(&tables_, &now, TablesPtr(std::move(next)))) return s;
  }
}

Status DefinitionRegistry::Register(const SagaDefinition& def) {
  SAGAD_RETURN_IF_ERROR(Validate(def));
  return Update([&def](Tables& t, bool* changed) {
    return Add(t.defs, t.toolboxes, def, "saga", "toolbox", changed);
  });
}

SagaDefinitionPtr DefinitionRegistry::Get(const std::string& name, int version) const {
  return Find(Current()->defs, name, version);
}

std::vector<SagaDefinitionPtr> DefinitionRegistry::All() const { return Flatten(Current()->defs); }

Status DefinitionRegistry::RegisterToolbox(const ToolboxDefinition& tb) {
  SAGAD_RETURN_IF_ERROR(Validate(tb));
  return Update([&tb](Tables& t, bool* changed) {
    return Add(t.toolboxes, t.defs, tb, "toolbox", "saga", changed);
  });
}

ToolboxDefinitionPtr DefinitionRegistry::GetToolbox(const std::string& name, int version) const {
  return Find(Current()->toolboxes, name, version);
}

std::vector<ToolboxDefinitionPtr> DefinitionRegistry::AllToolboxes() const {
  return Flatten(Current()->toolboxes);
}

bool DefinitionRegistry::FirstLook(const std::string& name, int version) {
  const auto key = std::make_pair(name, version);
  if (Current()->looked_at.count(key)) return false;  // the usual case: no copy
  bool first = false;
  Status always_ok = Update([&](Tables& t, bool* changed) {
    first = *changed = t.looked_at.insert(key).second;
    return Status::Ok();
  });
  (void)always_ok;
  return first;
}

}  // namespace sagad
