// The hooks of an InstanceRepository whose completions go to the instance's
// owner on `owners` (as the engine's do), and otherwise do nothing: for
// tests of what runs on the owner.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/engine/asio_executor.h"
#include "coordinator/engine/instance_repository.h"

namespace sagad::testing {

inline InstanceRepository::Hooks OwnerPostingHooks(AsioExecutor& owners) {
  InstanceRepository::Hooks hooks;
  hooks.outbox = [](const Instance&, const std::vector<Event>&) {
    return std::vector<nlohmann::json>{};
  };
  hooks.committed = [](const InstanceRepository::Commit&) {};
  hooks.attempted = [](std::chrono::steady_clock::duration) {};
  hooks.log = [](nlohmann::json) {};
  hooks.post = [&owners](const std::string& owner, std::function<void()> fn) {
    owners.PostTo(owner, std::move(fn));
  };
  return hooks;
}

}  // namespace sagad::testing
