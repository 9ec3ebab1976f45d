#include "coordinator/engine/asio_executor.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <thread>

#include "util/thread_role.h"

namespace sagad {
namespace {

// A task on the pool runs as an engine worker: it must not wait for a
// commit or a downstream call (util/thread_role.h).
std::function<void()> Marked(std::function<void()> fn) {
  return [fn = std::move(fn)] {
    ScopedThreadRole role(ThreadRole::kWorker);
    fn();
  };
}

}  // namespace

struct AsioExecutor::State {
  explicit State(int threads)
      : pool(static_cast<size_t>(std::max(1, threads))),
        work(boost::asio::make_work_guard(io)),
        timer_thread([this] { io.run(); }) {}

  boost::asio::thread_pool pool;
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work;
  std::thread timer_thread;
  std::atomic<bool> shut{false};
};

AsioExecutor::AsioExecutor(int threads) : state_(new State(threads)) {}

AsioExecutor::~AsioExecutor() { Shutdown(); }

void AsioExecutor::Post(std::function<void()> fn) {
  boost::asio::post(state_->pool, Marked(std::move(fn)));
}

void AsioExecutor::PostAfter(int64_t delay_ms, std::function<void()> fn) {
  auto timer = std::make_shared<boost::asio::steady_timer>(state_->io);
  timer->expires_after(std::chrono::milliseconds(std::max<int64_t>(0, delay_ms)));
  timer->async_wait([this, timer, fn = std::move(fn)](const boost::system::error_code& ec) mutable {
    if (!ec) boost::asio::post(state_->pool, Marked(std::move(fn)));
  });
}

void AsioExecutor::Shutdown() {
  if (state_->shut.exchange(true)) return;
  state_->work.reset();
  state_->io.stop();
  if (state_->timer_thread.joinable()) state_->timer_thread.join();
  state_->pool.join();
}

}  // namespace sagad
