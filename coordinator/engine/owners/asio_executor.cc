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

#include "util/check.h"
#include "util/thread_role.h"

namespace sagad {

namespace {
using WorkGuard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;

// The shard the calling thread runs, and whose (null: not a shard thread).
thread_local const void* tl_state = nullptr;
thread_local size_t tl_shard = 0;
}  // namespace

// One shard: an event loop, the thread that runs it, and its timers.
struct Shard {
  boost::asio::io_context io{1};
  WorkGuard work{boost::asio::make_work_guard(io)};
  std::thread thread;
  // The shard's thread only touches what follows (no lock): its timers
  // neither fired nor cancelled, by handle, and whether Shutdown began.
  struct Armed {
    std::unique_ptr<boost::asio::steady_timer> timer;
    bool counted;  // a TimerTo's (PendingTimers)
  };
  std::unordered_map<uint64_t, Armed> timers;
  bool stopping = false;
};

struct AsioExecutor::State {
  State(int threads, int housekeepers)
      : shards(static_cast<size_t>(std::max(1, threads))), house(std::max(1, housekeepers)) {
    for (size_t i = 0; i < shards.size(); ++i)
      shards[i].thread = std::thread([this, i] { RunShard(i); });
    for (int i = 0; i < std::max(1, housekeepers); ++i)
      house_threads.emplace_back([this, i] {
        NameThread(("sagad-house-" + std::to_string(i)).c_str());
        house.run();
      });
  }

  void RunShard(size_t i);
  size_t ShardOf(const std::string& owner) const {
    return std::hash<std::string>()(owner) % shards.size();
  }
  bool OnShard(size_t i) const { return tl_state == this && tl_shard == i; }
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
  // A new timer handle, of `shard`'s (never 0: the shard is handle % size).
  uint64_t NewHandle(size_t shard) {
    return (next_handle.fetch_add(1) + 1) * shards.size() + shard;
  }
  // On shard `handle % size`'s thread: `fire` runs there after `delay_ms`,
  // unless the timer is cancelled first or Shutdown began.
  void Arm(uint64_t handle, int64_t delay_ms, bool counted, Task fire) {
    const size_t i = handle % shards.size();
    SAGAD_CHECK(OnShard(i)) << "a timer is armed off its shard's thread";
    Shard& sh = shards[i];
    if (sh.stopping) {
      if (counted) pending.fetch_sub(1);
      return;
    }
    auto timer = std::make_unique<boost::asio::steady_timer>(sh.io);
    timer->expires_after(std::chrono::milliseconds(std::max<int64_t>(0, delay_ms)));
    // The handler holds `fire` only: a cancel destroys the timer, which
    // completes the wait at once and frees what `fire` held.
    timer->async_wait(
        [this, &sh, handle, fire = std::move(fire)](const boost::system::error_code& ec) mutable {
          if (!Disarm(sh, handle) || ec) return;  // cancelled
          fire();
        });
    sh.timers.emplace(handle, Shard::Armed{std::move(timer), counted});
  }
  // Forgets timer `handle` of `sh` (on its thread): whether it was armed.
  bool Disarm(Shard& sh, uint64_t handle) {
    auto it = sh.timers.find(handle);
    if (it == sh.timers.end()) return false;
    if (it->second.counted) pending.fetch_sub(1);
    // Destroyed after the erase: its cancelled wait finds no entry.
    auto timer = std::move(it->second.timer);
    sh.timers.erase(it);
    return true;
  }
  // A timer armed from any thread: on shard `shard`, once a task there.
  void ArmFromAnywhere(size_t shard, int64_t delay_ms, Task fire) {
    const uint64_t handle = NewHandle(shard);
    if (OnShard(shard)) return Arm(handle, delay_ms, /*counted=*/false, std::move(fire));
    PostOn(shard, [this, handle, delay_ms, fire = std::move(fire)]() mutable {
      Arm(handle, delay_ms, /*counted=*/false, std::move(fire));
    });
  }

  std::vector<Shard> shards;
  boost::asio::io_context house;
  WorkGuard house_work{boost::asio::make_work_guard(house)};
  std::vector<std::thread> house_threads;
  std::atomic<uint64_t> next_handle{0};
  std::atomic<size_t> pending{0};  // TimerTo's, neither fired nor cancelled
  std::atomic<bool> shut{false};
  std::atomic<int> posting{0};  // posts that have not returned yet
};

void AsioExecutor::State::RunShard(size_t i) {
  MarkThread(ThreadRole::kWorker);
  NameThread(("sagad-shard-" + std::to_string(i)).c_str());
  tl_state = this;
  tl_shard = i;
  shards[i].io.run();
}

AsioExecutor::AsioExecutor(int threads, int housekeepers)
    : state_(new State(threads, housekeepers)) {}

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
  // Nobody's timers are the housekeeping loop's, never a shard's: the
  // leases' heartbeat must not wait behind a shard's backlog (after a
  // restart, thousands of driver rounds; Asio looks at a loop's timers
  // only between its handlers). Shutdown abandons those not yet due.
  auto timer = std::make_shared<boost::asio::steady_timer>(state_->house);
  timer->expires_after(std::chrono::milliseconds(std::max<int64_t>(0, delay_ms)));
  timer->async_wait([timer, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (!ec) fn();
  });
}

void AsioExecutor::PostAfterTo(const std::string& owner, int64_t delay_ms, Task fn) {
  state_->ArmFromAnywhere(state_->ShardOf(owner), delay_ms, std::move(fn));
}

uint64_t AsioExecutor::TimerTo(const std::string& owner, int64_t delay_ms, Task fn) {
  State& s = *state_;
  const size_t shard = s.ShardOf(owner);
  SAGAD_CHECK(s.OnShard(shard)) << "TimerTo(" << owner << ") off the owner's thread";
  const uint64_t handle = s.NewHandle(shard);
  s.pending.fetch_add(1);
  s.Arm(handle, delay_ms, /*counted=*/true, std::move(fn));
  return handle;
}

void AsioExecutor::CancelTimer(uint64_t handle) {
  State& s = *state_;
  const size_t i = handle % s.shards.size();
  SAGAD_CHECK(s.OnShard(i)) << "CancelTimer off the owner's thread";
  s.Disarm(s.shards[i], handle);  // fired, or cancelled already: nothing
}

size_t AsioExecutor::PendingTimers() const { return state_->pending.load(); }

bool AsioExecutor::OnOwner(const std::string& owner) const {
  return state_->OnShard(state_->ShardOf(owner));
}

size_t AsioExecutor::OwnerThreads() const { return state_->shards.size(); }

size_t AsioExecutor::OwnerThreadOf(const std::string& owner) const {
  return state_->ShardOf(owner);
}

void AsioExecutor::Shutdown() {
  State& s = *state_;
  if (s.shut.exchange(true)) return;
  // Timers not yet due never fire; the tasks queued on the shards run.
  for (size_t i = 0; i < s.shards.size(); ++i)
    s.PostOn(i, [&s, i] {
      Shard& sh = s.shards[i];
      sh.stopping = true;
      while (!sh.timers.empty()) s.Disarm(sh, sh.timers.begin()->first);
    });
  for (auto& sh : s.shards) sh.work.reset();
  for (auto& sh : s.shards)
    if (sh.thread.joinable()) sh.thread.join();
  // The housekeeping's tasks still queued run (here, once its threads
  // are stopped: a timer not yet due would keep them waiting).
  s.house_work.reset();
  s.house.stop();
  for (auto& t : s.house_threads)
    if (t.joinable()) t.join();
  s.house.restart();
  s.house.poll();
}

}  // namespace sagad
