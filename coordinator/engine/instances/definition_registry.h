// DefinitionRegistry: the saga and toolbox definitions this process runs,
// by name and version (one name space: a name is a saga's or a toolbox's). A definition is
// validated when registered; registering the same name and version again is accepted only with an
// identical definition (two coordinators, or a restart, must never run one version two ways). An
// instance always runs under the version it started with.
// Thread-safety: every method may be called from any thread; a definition,
// once registered, is immutable and shared. The tables are read-mostly (a
// look-up for every step, a registration at start or on a deploy): readers
// take the current immutable copy without a lock; a writer copies it,
// changes the copy and publishes it by compare-and-swap, again if another
// writer published first.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sagas/definition.h"
#include "sagas/instance.h"
#include "sagas/toolbox.h"
#include "util/status.h"

namespace sagad {

class DefinitionRegistry {
 public:
  // InvalidArgument (from Validate, naming the step); AlreadyExists if this
  // name and version are registered with a different definition.
  Status Register(const SagaDefinition& def);
  // `version` <= 0: the newest. Null if not registered.
  SagaDefinitionPtr Get(const std::string& name, int version) const;
  // Every definition, by name then version.
  std::vector<SagaDefinitionPtr> All() const;
  // What `inst` runs by: a run's own definition (its calls), else the saga
  // at the instance's version (null if not registered).
  SagaDefinitionPtr For(const Instance& inst) const {
    return inst.is_run() ? inst.run_definition() : Get(inst.saga(), inst.saga_version());
  }

  // The same for toolboxes (sagas/toolbox.h).
  Status RegisterToolbox(const ToolboxDefinition& tb);
  ToolboxDefinitionPtr GetToolbox(const std::string& name, int version) const;
  std::vector<ToolboxDefinitionPtr> AllToolboxes() const;

  // True the first time the deployed definition `name` version `version` is
  // looked at: each one the store holds is decided on once (registered, or
  // found not runnable here and logged once), however often it is listed.
  bool FirstLook(const std::string& name, int version);

 private:
  struct Tables {
    std::map<std::string, std::map<int, SagaDefinitionPtr>> defs;
    std::map<std::string, std::map<int, ToolboxDefinitionPtr>> toolboxes;
    std::set<std::pair<std::string, int>> looked_at;
  };
  using TablesPtr = std::shared_ptr<const Tables>;
  TablesPtr Current() const;
  // Publishes what `change` makes of a copy of the current tables (again
  // on a copy of the newer ones if another writer published first); nothing
  // when it fails or sets `*changed` false. Its Status.
  Status Update(const std::function<Status(Tables&, bool* changed)>& change);

  TablesPtr tables_ = std::make_shared<const Tables>();  // std::atomic_load / _exchange only
};

}  // namespace sagad
