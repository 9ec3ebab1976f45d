// AsioExecutor: the production Executor (executor.h): `threads` workers on a
// Boost.Asio thread_pool, timers on an io_context run by one thread of its
// own; a timer that fires posts its task to the workers.
// Thread-safety: as Executor's.
#pragma once

#include <memory>

#include "coordinator/engine/executor.h"

namespace sagad {

class AsioExecutor final : public Executor {
 public:
  explicit AsioExecutor(int threads);
  ~AsioExecutor() override;

  void Post(std::function<void()> fn) override;
  void PostAfter(int64_t delay_ms, std::function<void()> fn) override;
  void Shutdown() override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sagad
