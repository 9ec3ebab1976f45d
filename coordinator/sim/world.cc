#include "coordinator/sim/world.h"

#include "coordinator/sim/agents.h"
#include "util/check.h"
#include "util/thread_role.h"

namespace sagad::sim {

int64_t ProcClock::NowMillis() const {
  const int64_t elapsed = world_.now() - World::kEpochMs;
  return World::kEpochMs + offset_ms_ + static_cast<int64_t>(static_cast<double>(elapsed) * rate_);
}

std::chrono::steady_clock::time_point ProcClock::SteadyNow() const {
  return std::chrono::steady_clock::time_point(std::chrono::milliseconds(NowMillis()));
}

namespace {
// The executor and shard of the task running now (null: none).
thread_local const SimExecutor* tl_executor = nullptr;
thread_local size_t tl_shard = 0;
}  // namespace

// A task of the executor runs as a worker's (util/thread_role.h) and as its
// shard's.
std::function<void()> SimExecutor::AsWorker(size_t shard, std::function<void()> fn) const {
  return [this, shard, fn = std::move(fn)] {
    ScopedThreadRole role(ThreadRole::kWorker);
    const SimExecutor* executor = tl_executor;
    const size_t was = tl_shard;
    tl_executor = this;
    tl_shard = shard;
    struct Restore {
      const SimExecutor* executor;
      size_t shard;
      ~Restore() {
        tl_executor = executor;
        tl_shard = shard;
      }
    } restore{executor, was};
    fn();
  };
}

void SimExecutor::Soon(size_t shard, std::function<void()> fn) {
  // A worker picks it up within a millisecond or two.
  world_.Schedule(world_.now() + static_cast<int64_t>(world_.random().Below(3)), proc_,
                  incarnation_, false, AsWorker(shard, std::move(fn)));
}

void SimExecutor::Later(size_t shard, int64_t delay_ms, std::function<void()> fn) {
  world_.Schedule(world_.now() + std::max<int64_t>(0, delay_ms), proc_, incarnation_, true,
                  AsWorker(shard, std::move(fn)));
}

void SimExecutor::Post(std::function<void()> fn) { Soon(kNobody, std::move(fn)); }

void SimExecutor::PostTo(const std::string& owner, std::function<void()> fn) {
  Soon(ShardOf(owner), std::move(fn));
}

void SimExecutor::PostAfter(int64_t delay_ms, std::function<void()> fn) {
  Later(kNobody, delay_ms, std::move(fn));
}

void SimExecutor::PostAfterTo(const std::string& owner, int64_t delay_ms,
                              std::function<void()> fn) {
  Later(ShardOf(owner), delay_ms, std::move(fn));
}

uint64_t SimExecutor::TimerTo(const std::string& owner, int64_t delay_ms,
                              std::function<void()> fn) {
  // The World's queue cannot take a task back: the task holds a slot the
  // cancel empties, which frees what `fn` held at once.
  SAGAD_CHECK(OnOwner(owner)) << "TimerTo(" << owner << ") off the owner's thread";
  const uint64_t handle = ++last_timer_;
  auto slot = std::make_shared<std::function<void()>>(std::move(fn));
  timers_.emplace(handle, slot);
  Later(ShardOf(owner), delay_ms, [this, handle, slot] {
    if (!*slot) return;  // cancelled
    timers_.erase(handle);
    auto f = std::move(*slot);
    *slot = nullptr;
    f();
  });
  return handle;
}

void SimExecutor::CancelTimer(uint64_t handle) {
  auto it = timers_.find(handle);
  if (it == timers_.end()) return;
  *it->second = nullptr;
  timers_.erase(it);
}

bool SimExecutor::OnOwner(const std::string& owner) const {
  return tl_executor == this && tl_shard == ShardOf(owner);
}

World::World(uint64_t seed, Scenario scenario, std::vector<SagaDefinition> sagas)
    : random_(seed),
      lines_(seed ^ 0x6c69'6e65ULL),
      scenario_(scenario),
      sagas_(std::move(sagas)),
      data_(MemoryStore().data()),
      downstreams_(*this),
      trace_(2048) {
  std::set<std::string> names;
  for (const auto& def : sagas_)
    for (const auto& st : def.steps) {
      names.insert(st.forward.service);
      if (st.compensation) names.insert(st.compensation->service);
    }
  downstreams_.Configure(names);
  procs_.resize(static_cast<size_t>(scenario_.coordinators));
  for (size_t i = 0; i < procs_.size(); ++i) {
    procs_[i].index = static_cast<int>(i);
    procs_[i].clock_offset = static_cast<int64_t>(random_.Below(201)) - 100;
    procs_[i].clock_rate = 0.99 + 0.02 * random_.NextDouble();
  }
}

World::~World() { StopAll(); }

void World::StopAll() {
  for (size_t i = 0; i < procs_.size(); ++i)
    if (procs_[i].engine) Teardown(static_cast<int>(i));
}

void World::Schedule(int64_t at, int proc, uint64_t incarnation, bool timer,
                     std::function<void()> fn) {
  queue_.emplace(Key{std::max(at, now_), random_.Next()},
                 Task{proc, incarnation, timer, std::move(fn)});
}

void World::Boot() {
  for (size_t i = 0; i < procs_.size(); ++i) Restart(static_cast<int>(i));
}

void World::Quiet() {
  quiet_ = true;
  scenario_.faults = FaultRates{};
  scenario_.store_faults = StoreFaultRates{};
  scenario_.crashes = scenario_.pauses = false;  // a re-introduced bug stays
  SIM_TRACE(*this, "quiet: faults stop");
  for (size_t i = 0; i < procs_.size(); ++i) {
    procs_[i].paused_until = 0;
    if (!procs_[i].engine) Restart(static_cast<int>(i));
  }
}

void World::Restart(int proc) {
  Process& p = procs_[static_cast<size_t>(proc)];
  SAGAD_CHECK(!p.engine) << "process " << proc << " restarted while running";
  ++p.incarnation;
  p.alive = true;
  p.zombie = false;
  p.paused_until = 0;
  p.clock = std::make_unique<ProcClock>(*this, p.clock_offset, p.clock_rate);
  p.random = std::make_unique<SeededRandom>(random_.Next());
  p.executor = std::make_unique<SimExecutor>(*this, proc, p.incarnation);
  p.store = std::make_unique<SimStore>(*this, proc);
  p.adapter = std::make_unique<SimAdapter>(*this, proc, p.incarnation);
  EngineOptions o;
  o.workers = 4;
  o.coordinator_id = "c" + std::to_string(proc);
  o.lease_ms = scenario_.lease_ms;
  o.executor = p.executor.get();
  o.random = p.random.get();
  p.engine = std::make_unique<Engine>(*p.store, *p.adapter, *p.clock, o);
  for (const auto& def : sagas_) SAGAD_CHECK(p.engine->Register(def).ok());
  static const ToolboxDefinition kTools = SimTools();
  SAGAD_CHECK(p.engine->RegisterToolbox(kTools).ok());
  SIM_TRACE(*this, "process " + std::to_string(proc) + " starts (incarnation " +
                       std::to_string(p.incarnation) + ")");
  Status s = p.engine->Start();
  if (!s.ok())
    SIM_TRACE(*this, "process " + std::to_string(proc) + " start failed: " + s.ToString());
  ApiOptions api;
  api.history_readers = 0;  // lists read inline: one thread, as everything here
  p.api = std::make_unique<ApiServer>(*p.engine, api);
  p.api->SetReady(true);
}

void World::Crash(int proc) {
  Process& p = procs_[static_cast<size_t>(proc)];
  if (!p.alive) return;
  SIM_TRACE(*this, "process " + std::to_string(proc) + " is killed");
  p.alive = false;
  p.zombie = true;
  p.store->Kill();
  p.adapter->Kill();
  teardown_.push_back(proc);
}

Process* World::AnyLive() {
  std::vector<Process*> live;
  for (auto& p : procs_)
    if (p.alive && !p.inside_call && p.paused_until <= now_) live.push_back(&p);
  if (live.empty()) return nullptr;
  return live[random_.Below(live.size())];
}

bool World::Stale(const Task& t) const {
  if (t.proc < 0) return false;
  const Process& p = procs_[static_cast<size_t>(t.proc)];
  if (t.incarnation != p.incarnation) return true;
  return p.zombie && t.timer;  // a dead process's timers never fire
}

// Drains what the dead process had queued (each call it makes fails:
// nothing reaches the store or a service), then stops and destroys its
// engine. A restart follows after a while.
void World::Teardown(int proc) {
  Process& p = procs_[static_cast<size_t>(proc)];
  p.store->Kill();
  p.adapter->Kill();
  p.zombie = true;
  for (bool more = true; more;) {
    more = false;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->second.proc != proc || it->second.incarnation != p.incarnation) {
        ++it;
        continue;
      }
      Task t = std::move(it->second);
      it = queue_.erase(it);
      if (t.timer) continue;
      t.fn();
      more = true;
      break;  // the queue may have changed
    }
  }
  p.engine->Stop();  // a wait it ends may still answer through the API
  p.api.reset();
  p.engine.reset();
  ++p.incarnation;  // anything left of it is stale
  p.alive = false;
  p.zombie = false;
}

void World::RunTask(Task& t) {
  ++events_;
  const int outer = running_proc_;
  running_proc_ = t.proc;
  // A task marks its own role (a worker's, the committer's); one run inside
  // another's RunOthers must not inherit the outer task's.
  ScopedThreadRole role(ThreadRole::kUnmarked);
  const SimExecutor* executor = tl_executor;  // ... nor its owner
  tl_executor = nullptr;
  t.fn();
  tl_executor = executor;
  running_proc_ = outer;
}

bool World::RunUntil(int64_t until) {
  while (violation_.empty() && !queue_.empty()) {
    auto it = queue_.begin();
    if (it->first.first > until) break;
    now_ = std::max(now_, it->first.first);
    Task t = std::move(it->second);
    queue_.erase(it);
    if (Stale(t)) continue;
    if (t.proc >= 0) {
      Process& p = procs_[static_cast<size_t>(t.proc)];
      if (p.paused_until > now_) {  // a paused process's work waits
        Schedule(p.paused_until, t.proc, t.incarnation, t.timer, std::move(t.fn));
        continue;
      }
    }
    RunTask(t);
    if (events_ > kMaxEvents)
      Violation("livelock: more than " + std::to_string(kMaxEvents) +
                " events in one seed (a seed takes a few hundred): the engine keeps working "
                "without settling");
    while (!teardown_.empty() && !nested_) {
      int proc = teardown_.back();
      teardown_.pop_back();
      Teardown(proc);
      At(now_ + 100 + static_cast<int64_t>(random_.Below(3000)), [this, proc] {
        if (!procs_[static_cast<size_t>(proc)].engine) Restart(proc);
      });
    }
  }
  if (violation_.empty() && now_ < until) now_ = until;
  return violation_.empty();
}

void World::RunOthers(int proc, int64_t until) {
  if (nested_) {  // a pause within a pause: time just passes
    now_ = std::max(now_, until);
    return;
  }
  nested_ = true;
  Process& me = procs_[static_cast<size_t>(proc)];
  const int64_t was = me.paused_until;
  me.paused_until = std::max(was, until);
  me.inside_call = true;
  while (violation_.empty() && !queue_.empty()) {
    auto it = queue_.begin();
    if (it->first.first >= until) break;  // its own tasks wait at `until`
    now_ = std::max(now_, it->first.first);
    Task t = std::move(it->second);
    queue_.erase(it);
    if (Stale(t)) continue;
    if (t.proc == proc ||
        (t.proc >= 0 && procs_[static_cast<size_t>(t.proc)].paused_until > now_)) {
      int64_t at = t.proc == proc ? until : procs_[static_cast<size_t>(t.proc)].paused_until;
      Schedule(at, t.proc, t.incarnation, t.timer, std::move(t.fn));
      continue;
    }
    RunTask(t);  // the world's tasks (clients, operators, restarts) run too
  }
  now_ = std::max(now_, until);
  me.paused_until = was;
  me.inside_call = false;
  nested_ = false;
}

void World::Violation(const std::string& what) {
  if (!violation_.empty()) return;
  violation_ = what;
  SIM_TRACE(*this, "VIOLATION: " + what);
}

void World::Trace(const std::string& line) {
  if (!tracing_) return;
  trace_[trace_next_ % trace_.size()] = std::to_string(now_ - kEpochMs) + " " + line;
  ++trace_next_;
}

std::vector<std::string> World::TraceTail(size_t n) const {
  std::vector<std::string> out;
  size_t have = std::min(trace_next_, trace_.size());
  n = std::min(n, have);
  for (size_t i = trace_next_ - n; i < trace_next_; ++i) out.push_back(trace_[i % trace_.size()]);
  return out;
}

}  // namespace sagad::sim
