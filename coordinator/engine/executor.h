// Executor: where the engine's work runs. The engine never creates a thread
// or a timer itself: every driver round, step action, wake-up, heartbeat and
// retention sweep is a task handed to its Executor. Production uses a pool
// of worker threads and one timer thread (asio_executor.h, the default);
// the simulator (coordinator/sim/) runs every task on one thread, in an
// order drawn from a seed, under simulated time.
//
// Contract:
// - Post(fn): fn runs once, soon, on some thread of the executor (never
//   inside Post).
// - PostAfter(ms, fn): fn runs once, no sooner than `ms` of the executor's
//   time from now, like a Post then.
// - Shutdown(): once it returns no task runs or will run: tasks still
//   queued run before it returns or never, timers not yet due never fire.
//   The engine calls it after its drivers ended (Engine::Stop).
// Thread-safety: Post and PostAfter may be called from any thread,
// including from inside a task.
#pragma once

#include <cstdint>
#include <functional>

namespace sagad {

class Executor {
 public:
  virtual ~Executor() = default;
  virtual void Post(std::function<void()> fn) = 0;
  virtual void PostAfter(int64_t delay_ms, std::function<void()> fn) = 0;
  virtual void Shutdown() = 0;
};

}  // namespace sagad
