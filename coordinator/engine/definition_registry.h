// DefinitionRegistry: the saga definitions this process runs, by name and
// version. A definition is validated when registered; registering the same
// name and version again is accepted only with an identical definition (two
// coordinators, or a restart, must never run one version two ways). An
// instance always runs under the version it started with.
// Thread-safety: every method may be called from any thread; a definition,
// once registered, is immutable and shared.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sagas/definition.h"
#include "util/mutex.h"
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

 private:
  mutable Mutex mu_;
  std::map<std::string, std::map<int, SagaDefinitionPtr>> defs_ GUARDED_BY(mu_);
};

}  // namespace sagad
