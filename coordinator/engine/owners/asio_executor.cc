#include "coordinator/engine/owners/asio_executor.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <thread>
#include <unordered_map>
#include <vector>

#include "util/mutex.h"
#include "util/thread_role.h"

namespace sagad {

namespace {
using WorkGuard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
}  // namespace

// One shard: an event loop and the thread that runs it.
struct Shard {
  boost::asio::io_context io{1};
  WorkGuard work{boost::asio::make_work_guard(io)};
  std::thread thread;
};

struct AsioExecutor::State {
  explicit State(int threads)
      : shards(static_cast<size_t>(std::max(1, threads))), house(kHouseThreads) {
    for (size_t i = 0; i < shards.size(); ++i)
      shards[i].thread = std::thread([this, i] { RunShard(i); });
    for (int i = 0; i < kHouseThreads; ++i)
      house_threads.emplace_back([this, i] {
        NameThread(("sagad-house-" + std::to_string(i)).c_str());
        house.run();
      });
    timer_thread = std::thread([this] {
      NameThread("sagad-timer");
      timers.run();
    });
  }

  void RunShard(size_t i);
  size_t ShardOf(const std::string& owner) const {
    return std::hash<std::string>()(owner) % shards.size();
  }
  // Nobody's task (a heartbeat, a retention sweep, a waiter's look at the
  // store, a guard's lock): on the housekeeping threads, which may wait for
  // the store, so that no owner does.
  void PostHouse(Task fn) {
    posting.fetch_add(1);
    boost::asio::post(house, std::move(fn));
    posting.fetch_sub(1);
  }
  // A thread that posts is still inside Asio (signalling the shard's
  // condition variable) after the task may already have run: counted, so
  // that the loops are destroyed only once every post has returned.
  void PostOn(size_t shard, Task fn) {
    posting.fetch_add(1);
    boost::asio::post(shards[shard].io, std::move(fn));
    posting.fetch_sub(1);
  }
  void After(int64_t delay_ms, std::function<void(State&)> fire) {
    auto timer = std::make_shared<boost::asio::steady_timer>(timers);
    timer->expires_after(std::chrono::milliseconds(std::max<int64_t>(0, delay_ms)));
    timer->async_wait(
        [this, timer, fire = std::move(fire)](const boost::system::error_code& ec) mutable {
          if (!ec) fire(*this);
        });
  }

  // Two: a heartbeat is not held up by one look at a store that does not
  // answer (each bounded by the store's statement deadline).
  static constexpr int kHouseThreads = 2;
  std::vector<Shard> shards;
  boost::asio::io_context house;
  WorkGuard house_work{boost::asio::make_work_guard(house)};
  std::vector<std::thread> house_threads;
  boost::asio::io_context timers;
  WorkGuard timers_work{boost::asio::make_work_guard(timers)};
  std::thread timer_thread;
  // TimerTo's timers not yet fired nor cancelled, by handle (after `timers`:
  // destroyed before the loop they belong to).
  mutable Mutex cancellable_mu;
  std::unordered_map<uint64_t, std::shared_ptr<boost::asio::steady_timer>> cancellable
      GUARDED_BY(cancellable_mu);
  uint64_t last_handle GUARDED_BY(cancellable_mu) = 0;
  std::atomic<bool> shut{false};
  std::atomic<int> posting{0};  // posts that have not returned yet
};

namespace {
// The shard the calling thread runs, and whose (null: not a shard thread).
thread_local const void* tl_state = nullptr;
thread_local size_t tl_shard = 0;
}  // namespace

void AsioExecutor::State::RunShard(size_t i) {
  MarkThread(ThreadRole::kWorker);
  NameThread(("sagad-shard-" + std::to_string(i)).c_str());
  tl_state = this;
  tl_shard = i;
  shards[i].io.run();
}

AsioExecutor::AsioExecutor(int threads) : state_(new State(threads)) {}

AsioExecutor::~AsioExecutor() {
  Shutdown();
  // A committer or an HTTP client loop may have posted a task that has run
  // and been waited for, and still be returning from the post.
  while (state_->posting.load() != 0) std::this_thread::yield();
}

void AsioExecutor::Post(Task fn) { state_->PostHouse(std::move(fn)); }

void AsioExecutor::PostTo(const std::string& owner, Task fn) {
  state_->PostOn(state_->ShardOf(owner), std::move(fn));
}

void AsioExecutor::PostAfter(int64_t delay_ms, Task fn) {
  state_->After(delay_ms, [fn = std::move(fn)](State& s) mutable { s.PostHouse(std::move(fn)); });
}

void AsioExecutor::PostAfterTo(const std::string& owner, int64_t delay_ms, Task fn) {
  state_->After(delay_ms, [shard = state_->ShardOf(owner), fn = std::move(fn)](State& s) mutable {
    s.PostOn(shard, std::move(fn));
  });
}

uint64_t AsioExecutor::TimerTo(const std::string& owner, int64_t delay_ms, Task fn) {
  State& s = *state_;
  auto timer = std::make_shared<boost::asio::steady_timer>(s.timers);
  uint64_t handle;
  {
    MutexLock l(s.cancellable_mu);
    handle = ++s.last_handle;
    s.cancellable.emplace(handle, timer);
  }
  // Only the caller knows `handle`, and only once this returns: no
  // CancelTimer can touch the timer before async_wait was called.
  timer->expires_after(std::chrono::milliseconds(std::max<int64_t>(0, delay_ms)));
  timer->async_wait([&s, timer, handle, shard = s.ShardOf(owner),
                     fn = std::move(fn)](const boost::system::error_code& ec) mutable {
    bool live;
    {
      MutexLock l(s.cancellable_mu);
      live = s.cancellable.erase(handle) == 1;
    }
    if (!ec && live) s.PostOn(shard, std::move(fn));
  });
  return handle;
}

void AsioExecutor::CancelTimer(uint64_t handle) {
  State& s = *state_;
  std::shared_ptr<boost::asio::steady_timer> timer;
  {
    MutexLock l(s.cancellable_mu);
    auto it = s.cancellable.find(handle);
    if (it == s.cancellable.end()) return;  // fired, or cancelled already
    timer = std::move(it->second);
    s.cancellable.erase(it);
  }
  // A timer is touched on its loop's thread only: the cancel completes the
  // wait at once (operation_aborted), which frees the task it held.
  boost::asio::post(s.timers, [timer] { timer->cancel(); });
}

size_t AsioExecutor::PendingTimers() const {
  MutexLock l(state_->cancellable_mu);
  return state_->cancellable.size();
}

bool AsioExecutor::OnOwner(const std::string& owner) const {
  return tl_state == state_.get() && tl_shard == state_->ShardOf(owner);
}

void AsioExecutor::Shutdown() {
  if (state_->shut.exchange(true)) return;
  // Timers not yet due never fire; the tasks queued on the shards run.
  state_->timers_work.reset();
  state_->timers.stop();
  if (state_->timer_thread.joinable()) state_->timer_thread.join();
  for (auto& s : state_->shards) s.work.reset();
  for (auto& s : state_->shards)
    if (s.thread.joinable()) s.thread.join();
  state_->house_work.reset();
  for (auto& t : state_->house_threads)
    if (t.joinable()) t.join();
}

}  // namespace sagad
