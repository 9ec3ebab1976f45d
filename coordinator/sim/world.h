// World: one simulated run of sagad from one seed. It owns simulated time
// and one queue of tasks ordered by (time, a random draw): the coordinator
// processes' engine tasks (through SimExecutor), clients, operators,
// late-arriving requests, crashes and restarts. Everything runs on the
// calling thread, one task at a time, so one seed is one run, exactly.
//
// A coordinator process is a real Engine (coordinator/engine/) over a
// SimStore handle (faults) and a SimAdapter (simulated downstreams), with
// its own clock (an offset and a rate within 1 % of true time), its own
// seeded Random and its own SimExecutor. A crash marks the process dead at
// once (its store handle and adapter refuse everything from then on: the
// rest of the task it was in has no effect), then drains what it had
// queued, stops and destroys the Engine; a restart builds a new one under
// the same coordinator id. A pause defers its tasks; a pause inside a send
// runs the other processes meanwhile (World::RunOthers).
// Thread-safety: none (one thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "coordinator/engine/engine.h"
#include "coordinator/engine/owners/executor.h"
#include "coordinator/http/http_api.h"
#include "coordinator/sim/bugs.h"
#include "coordinator/sim/downstream.h"
#include "coordinator/sim/sim_store.h"
#include "policies/retry_budget.h"
#include "util/clock.h"
#include "util/random.h"

#define SIM_TRACE(world, line)                  \
  do {                                          \
    if ((world).tracing()) (world).Trace(line); \
  } while (0)

namespace sagad::sim {

class World;

// A process's clock: true time scaled by `rate` and shifted by `offset_ms`.
class ProcClock final : public Clock {
 public:
  ProcClock(const World& world, int64_t offset_ms, double rate)
      : world_(world), offset_ms_(offset_ms), rate_(rate) {}
  int64_t NowMillis() const override;
  std::chrono::steady_clock::time_point SteadyNow() const override;

 private:
  const World& world_;
  int64_t offset_ms_;
  double rate_;
};

// Executor of one incarnation of one process: tasks on the World's queue.
class SimExecutor final : public Executor {
 public:
  SimExecutor(World& world, int proc, uint64_t incarnation)
      : world_(world), proc_(proc), incarnation_(incarnation) {}
  void Post(std::function<void()> fn) override;
  void PostTo(const std::string& owner, std::function<void()> fn) override;
  void PostAfter(int64_t delay_ms, std::function<void()> fn) override;
  void PostAfterTo(const std::string& owner, int64_t delay_ms, std::function<void()> fn) override;
  uint64_t TimerTo(const std::string& owner, int64_t delay_ms, std::function<void()> fn) override;
  void CancelTimer(uint64_t handle) override;
  size_t PendingTimers() const override { return timers_.size(); }
  // True inside a task posted to an owner of the same shard (of kShards,
  // as production's threads): a task posted to nobody, or run by the
  // store's committer or a client, is nobody's owner.
  bool OnOwner(const std::string& owner) const override;
  size_t OwnerThreads() const override { return kShards; }
  size_t OwnerThreadOf(const std::string& owner) const override { return ShardOf(owner); }
  void Shutdown() override {}

  static constexpr size_t kShards = 4;

 private:
  static size_t ShardOf(const std::string& owner) {
    return std::hash<std::string>()(owner) % kShards;
  }
  // fn as a worker's task of `shard` (kNobody: no owner's).
  std::function<void()> AsWorker(size_t shard, std::function<void()> fn) const;
  // Queues fn as a task of `shard`: soon, or after delay_ms (a timer).
  void Soon(size_t shard, std::function<void()> fn);
  void Later(size_t shard, int64_t delay_ms, std::function<void()> fn);
  static constexpr size_t kNobody = kShards;

  World& world_;
  int proc_;
  uint64_t incarnation_;
  // TimerTo's timers not yet fired nor cancelled (the World runs one task at
  // a time: no lock).
  std::map<uint64_t, std::shared_ptr<std::function<void()>>> timers_;
  uint64_t last_timer_ = 0;
};

struct Process {
  int index = 0;
  uint64_t incarnation = 0;
  bool alive = false;
  bool zombie = false;       // crashed, not torn down yet
  int64_t paused_until = 0;  // true ms: its tasks wait until then
  bool inside_call = false;  // paused inside a store or downstream call
  int64_t clock_offset = 0;
  double clock_rate = 1.0;
  std::unique_ptr<ProcClock> clock;
  std::unique_ptr<SeededRandom> random;
  std::unique_ptr<SimExecutor> executor;
  std::unique_ptr<SimStore> store;
  std::unique_ptr<SimAdapter> adapter;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<ApiServer> api;  // its HTTP API, served in-process (ApiClient)
};

// What a seed's run is made of (drawn from the seed; see workload.cc).
struct Scenario {
  int coordinators = 1;
  int64_t lease_ms = 3000;
  bool crashes = true;
  bool pauses = false;
  FaultRates faults;
  StoreFaultRates store_faults;
  // Every service's retry budget when tight (capacity 0: the default), so
  // that re-sends are deferred and reserve their tokens.
  RetryBudgetConfig retry_budget{0, 0};
  Bug bug = Bug::kNone;  // re-introduced on purpose (bugs.h)
  // The store's reads may wait (as PostgreSQL's): the engine reads ahead of
  // its owners (Store::ReadsMayWait). Half the seeds, each path simulated.
  bool remote_reads = false;
};

class World {
 public:
  static constexpr int64_t kEpochMs = 1'800'000'000'000;  // 2027-01-15
  // More events than this in one seed is a livelock (a seed takes hundreds).
  static constexpr uint64_t kMaxEvents = 1'000'000;
  // An instance whose log grows past this is a runaway (one takes tens).
  static constexpr int64_t kMaxLog = 2'000;

  World(uint64_t seed, Scenario scenario, std::vector<SagaDefinition> sagas);
  ~World();

  int64_t now() const { return now_; }
  SeededRandom& random() { return random_; }
  // Waits in connection lines (FaultRates::line_wait): a stream of its own.
  SeededRandom& lines() { return lines_; }
  Downstreams& downstreams() { return downstreams_; }
  const std::shared_ptr<MemoryData>& data() const { return data_; }
  const Scenario& scenario() const { return scenario_; }
  const std::vector<SagaDefinition>& sagas() const { return sagas_; }
  // Steps ("saga/step") whose authors asked for an approval, whatever the
  // registered definition says (a typo accepted would drop the gate).
  void set_meant_gated(std::set<std::string> steps) { meant_gated_ = std::move(steps); }
  bool MeantGated(const std::string& saga, const std::string& step) const {
    return meant_gated_.count(saga + "/" + step) > 0;
  }
  std::vector<Process>& processes() { return procs_; }
  // The store's shared locks (Store::LockShared, as PostgreSQL's advisory
  // locks): name -> the holding process and the hold's serial.
  std::map<std::string, std::pair<int, uint64_t>>& shared_locks() { return shared_locks_; }
  uint64_t NextSerial() { return ++serial_; }
  // The process whose task runs now (-1: the world's own).
  int running_proc() const { return running_proc_; }

  // Queues fn at true time `at` for process `proc` (-1: the world's own).
  void Schedule(int64_t at, int proc, uint64_t incarnation, bool timer, std::function<void()> fn);
  void At(int64_t at, std::function<void()> fn) { Schedule(at, -1, 0, false, std::move(fn)); }

  // Starts every process.
  void Boot();
  // From now on: no faults, crashes or pauses; every process up.
  void Quiet();
  bool quiet() const { return quiet_; }
  // Runs tasks until the queue is empty or time passes `until`; false if a
  // violation stopped it.
  bool RunUntil(int64_t until);
  // Inside a task of `proc`: runs the other processes' (and the world's)
  // tasks up to `until`, then sets the time to it. Not nested.
  void RunOthers(int proc, int64_t until);

  // Kills `proc` now (SIGKILL); the teardown follows the current task.
  void Crash(int proc);
  // Tears every process down (the end of a seed). Call it while the
  // clients still exist: a process's teardown answers what it still owed
  // them (a long poll ended by the engine's stop), into their exchanges.
  void StopAll();
  void Restart(int proc);
  // A live process (for clients and operators), or nullptr.
  Process* AnyLive();

  // Violations stop the run; the first one is kept.
  void Violation(const std::string& what);
  const std::string& violation() const { return violation_; }
  // The last `n` lines of the trace (events, log lines), kept only while
  // tracing (SIM_TRACE builds a line only then): a seed runs untraced and,
  // if it fails, again with the trace on (the same run, exactly).
  void SetTracing(bool on) { tracing_ = on; }
  bool tracing() const { return tracing_; }
  void Trace(const std::string& line);
  std::vector<std::string> TraceTail(size_t n) const;
  uint64_t events() const { return events_; }

 private:
  struct Task {
    int proc;
    uint64_t incarnation;
    bool timer;
    std::function<void()> fn;
  };
  using Key = std::pair<int64_t, uint64_t>;  // time, tie-break draw
  void RunTask(Task& t);
  void Teardown(int proc);
  // True if `t` belongs to an incarnation that is gone (dropped).
  bool Stale(const Task& t) const;

  SeededRandom random_;
  SeededRandom lines_;
  Scenario scenario_;
  std::vector<SagaDefinition> sagas_;
  std::set<std::string> meant_gated_;
  int64_t now_ = kEpochMs;
  std::multimap<Key, Task> queue_;
  std::shared_ptr<MemoryData> data_;
  Downstreams downstreams_;
  std::vector<Process> procs_;
  std::map<std::string, std::pair<int, uint64_t>> shared_locks_;
  uint64_t serial_ = 0;
  std::vector<int> teardown_;  // crashed inside a task
  int running_proc_ = -1;
  bool nested_ = false;
  bool quiet_ = false;
  bool tracing_ = false;
  std::string violation_;
  std::vector<std::string> trace_;  // ring
  size_t trace_next_ = 0;
  uint64_t events_ = 0;
};

}  // namespace sagad::sim
