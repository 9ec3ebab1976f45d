// Driver: which instance runs next, its saga-level transitions, its step
// actions on workers (and which steps are under way), durable timers,
// deadlines and the recovery round robin.
#include "coordinator/engine/driver/driver.h"

#include <atomic>
#include <optional>

#include "coordinator/engine/instances/saga_turns.h"
#include "policies/deadlines.h"
#include "util/check.h"
#include "util/crash_point.h"
#include "util/log.h"
#include "util/mutex.h"

namespace sagad {

Driver::Driver(Adapter& adapter, const DefinitionRegistry& defs, InstanceRepository& repo,
               Ownership& ownership, RunTable& runs, RecoveryTracker& recovery,
               EngineMetrics& metrics, ServiceGates& gates, const Clock& clock, Random& random,
               Executor& executor, int workers, bool reads_may_wait)
    : defs_(defs),
      repo_(repo),
      ownership_(ownership),
      runs_(runs),
      recovery_(recovery),
      metrics_(metrics),
      clock_(clock),
      executor_(executor),
      workers_(std::max(1, workers)),
      reads_may_wait_(reads_may_wait),
      steps_(adapter, clock, ownership, runs, metrics, gates, executor, *this, random) {}

auto Driver::Schedule(const std::string& id) -> void {
  if (!runs_.Enter(id)) return;
  if (!reads_may_wait_ || (ownership_.Held(id) && repo_.CachedVersion(id) != 0)) {
    executor_.PostTo(id, [this, id] { DriveLoop(id); });
    return;
  }
  // A store whose reads may wait (PostgreSQL): what the first round needs
  // from it (the lease, the instance) is fetched by a task nobody owns,
  // which may wait: the owner then finds both in memory and makes no round
  // trip (unless the lease is another live process's, or the copy was
  // dropped meanwhile). LMDB's reads are memory: the owner reads itself
  // (the hand-over would cost more: recovery of 10,000 in flight resumed
  // 5 % and completed 15 % later with it).
  executor_.Post([this, id] {
    try {
      if (!runs_.Stopping() && EnsureOwned(id)) (void)repo_.Load(id);
    } catch (const std::exception& e) {  // the round says it again
      EngineLog(LogLevel::kError,
                {{"msg", "prefetch error"}, {"instance", id}, {"error", e.what()}});
    }
    executor_.PostTo(id, [this, id] { DriveLoop(id); });
  });
}

auto Driver::FirstStep(Tx& tx, const SagaDefinition& def, StepMark* step, StepRequest* request)
    -> Status {
  *step = StepMark();
  // A graph's roots start together, with a driver round; a run's calls go
  // one at a time, whatever their definition's order says. A call appended
  // through a coordinator that does not hold the run's lease is left to the
  // holder's driver (its send would be withheld at the connection line).
  const Instance& inst = tx.inst();
  if (!def.IsChain() && !inst.is_run()) return Status::Ok();
  if (inst.is_run() && !inst.steps().empty() && !ownership_.Held(inst.id())) return Status::Ok();
  // Only with a worker free to send it now. A STARTED record that waits in
  // the queue is, after a crash, a request to ask about and re-send (within
  // the retry budget) although it never left: under load the first step is
  // started by the worker that sends it, as before.
  if (runs_.Busy() >= static_cast<size_t>(workers_)) return Status::Ok();
  return steps_.ChainFirst(tx, def, step, request);
}

auto Driver::StartCreated(const std::string& id, const SagaDefinitionPtr& def, StepMark step,
                          StepRequest* request, const TraceContext& trace, bool created) -> void {
  if (!created) return;  // nothing was written: the mark goes with `step`
  if (!step) {
    Schedule(id);
    return;
  }
  auto mark = std::make_shared<StepMark>(std::move(step));
  executor_.PostTo(id, [this, id, d = def, mark, r = std::move(*request), trace]() mutable {
    CheckOwner(id, "a created instance's first send");
    const int step = mark->step();
    StepRunner::Done done = StepEnd(id, mark, /*recovered=*/false);
    try {
      // Stopping: the STARTED record is durable, so the next start
      // reconciles it; nothing is sent now.
      if (runs_.Stopping()) return done(Next::kStop);
      steps_.Send(id, d, step, std::move(r), trace, mark, done);
    } catch (const std::exception& e) {
      EngineLog(LogLevel::kError,
                {{"msg", "step task error"}, {"instance", id}, {"error", e.what()}});
      ScheduleAfter(id, 5000);
      done(Next::kStop);
    }
  });
}

auto Driver::StepEnd(const std::string& id, std::shared_ptr<StepMark> mark, bool recovered)
    -> StepRunner::Done {
  auto ended = std::make_shared<std::atomic<bool>>(false);
  return [this, id, mark = std::move(mark), recovered, ended](Next next) {
    if (ended->exchange(true)) return;  // an action ends once (an exception after its end)
    // On an adapter's thread the engine may be stopping: it waits for this.
    runs_.ReleaseThen(*mark, [&] {
      if (recovered) MarkRecovered(id);
      // Not owned any more: it finished (a terminal commit gives the lease
      // up) or another process took it; either way nothing is left to do.
      if (next == Next::kContinue && ownership_.Held(id)) Schedule(id);
    });
  };
}

auto Driver::ScheduleAfter(const std::string& id, int64_t delay_ms) -> void {
  executor_.PostAfterTo(id, delay_ms, [this, id] { Schedule(id); });
}

auto Driver::DriveLoop(const std::string& id) -> void { Resume(id, 0, Round::kAgain); }

auto Driver::CheckOwner(const std::string& id, const char* what) const -> void {
  SAGAD_CHECK(executor_.OnOwner(id))
      << what << " of instance " << id << " runs off the instance's owner thread";
}

auto Driver::Resume(const std::string& id, int round, Round r) -> void {
  // Every round commits a transition, hands the instance on, or returns; a
  // round that does none of these again and again is a livelock of ours.
  constexpr int kMaxRounds = 10000;
  CheckOwner(id, "a driver round");
  while (true) {
    try {
      for (; r == Round::kAgain && !runs_.Stopping(); ++round) {
        SAGAD_CHECK(round < kMaxRounds)
            << "instance " << id << " went round " << round << " times without settling";
        r = DriveRound(id, round);
      }
    } catch (const std::exception& e) {
      DriverError(id, e);
      r = Round::kDone;
    }
    // A commit is under way: its continuation goes on with the next round.
    if (r == Round::kPending) return;
    switch (runs_.Leave(id, r == Round::kYield)) {
      case RunTable::After::kAgain:
        round = 0;
        r = Round::kAgain;
        continue;
      case RunTable::After::kRequeue:  // to the back of the queue
        executor_.PostTo(id, [this, id] { DriveLoop(id); });
        return;
      case RunTable::After::kDone:
        return;
    }
  }
}

template <typename After>
auto Driver::CommitRound(const std::string& id, int round, Mutation fn, After after) -> Round {
  CommitAsOwnerAsync(id, std::move(fn), [this, id, round, after = std::move(after)](Status s) {
    Round r = Round::kDone;
    try {
      r = after(s.ok() ? Next::kContinue : AfterFailedCommit(id, s));
    } catch (const std::exception& e) {
      DriverError(id, e);
    }
    Resume(id, round + 1, r);
  });
  return Round::kPending;
}

auto Driver::DriverError(const std::string& id, const std::exception& e) -> void {
  // A bug, not an expected failure: say so loudly and try again later
  // rather than leave the instance without a driver.
  EngineLog(LogLevel::kError, {{"msg", "driver error"}, {"instance", id}, {"error", e.what()}});
  ScheduleAfter(id, 5000);
}

auto Driver::AgainUnlessStopped(Next next) -> Round {
  return next == Next::kStop ? Round::kDone : Round::kAgain;
}

auto Driver::DriveRound(const std::string& id, int round) -> Round {
  if (round > 0) {
    // Owned at the previous round and not now: it finished (a terminal
    // commit gives the lease up) or another process took it. Either way
    // there is nothing more to do here.
    if (!ownership_.Held(id)) {
      NoWake(id);
      return Round::kDone;
    }
  } else if (!EnsureOwned(id)) {  // another live process drives it
    recovery_.Forget(id);
    NoWake(id);
    return Round::kDone;
  }
  auto inst = repo_.Load(id);
  if (!inst.ok()) {
    EngineLog(
        LogLevel::kError,
        {{"msg", "cannot load instance"}, {"instance", id}, {"error", inst.status().ToString()}});
    recovery_.Forget(id);
    // Storage trouble (a database restart): try again, or nothing would
    // drive this instance until the next process start.
    if (inst.status().code() != StatusCode::kNotFound) ScheduleAfter(id, 1000);
    return Round::kDone;
  }
  SagaDefinitionPtr def = defs_.For(**inst);
  if (!def) return EscalateUnregistered(id, round, **inst);
  int64_t wake_at = 0;  // a deadline still ahead, for when the saga waits
  if (auto fn = Deadlines(*def, **inst, &wake_at)) {
    MarkRecovered(id);
    return CommitRound(id, round, std::move(fn), AgainUnlessStopped);
  }
  std::vector<Action> actions = NextActions(*def, **inst);
  const Action a = actions.front();
  if (a.kind == ActionKind::kRequestApproval || IsStepAction(a.kind))
    return StepRound(id, round, def, **inst, actions, wake_at);
  if (a.kind == ActionKind::kNone) {
    if (wake_at > 0)
      WakeAt(id, wake_at);
    else
      NoWake(id);
    MarkRecovered(id);
    return Round::kDone;
  }
  Mutation fn = SagaTransition(def, a);
  if (!fn) return Round::kDone;
  return CommitRound(id, round, std::move(fn), [this, id](Next n) { return AfterRound(id, n); });
}

// Never run an instance under a definition other than the one it started
// with: a human decides.
auto Driver::EscalateUnregistered(const std::string& id, int round, const Instance& inst) -> Round {
  std::string why = "saga " + inst.saga() + " version " + std::to_string(inst.saga_version()) +
                    " is not registered in this coordinator";
  EngineLog(LogLevel::kWarn,
            {{"msg", "definition not registered"}, {"instance", id}, {"saga", inst.saga()}});
  SagaStatus ss = inst.status();
  MarkRecovered(id);
  if (ss != SagaStatus::kRunning && ss != SagaStatus::kAwaitingApproval &&
      ss != SagaStatus::kCompensating)
    return Round::kDone;
  return CommitRound(
      id, round,
      [why](Tx& tx) {
        return tx.Saga(SagaEvent::kEscalate, {{"reason", why}});
      },
      [](Next) { return Round::kDone; });
}

auto Driver::StepRound(const std::string& id, int round, const SagaDefinitionPtr& def,
                       const Instance& inst, const std::vector<Action>& actions, int64_t wake_at)
    -> Round {
  if (HasApprovalRequest(actions)) {
    MarkRecovered(id);
    return CommitRound(
        id, round, [this, def, actions](Tx& tx) { return RequestApprovals(tx, *def, actions); },
        AgainUnlessStopped);
  }
  Action here;
  StepMark here_mark;
  if (!LaunchSteps(id, *def, inst, actions, wake_at, &here, &here_mark)) {
    MarkRecovered(id);
    return Round::kDone;
  }
  if (here.kind == ActionKind::kNone) return Round::kDone;  // the workers carry on
  // A plain list runs its one step action in this driver (no hand-off to
  // another worker, as before graphs); so does any saga in recovery. If the
  // action ends here (its calls were answered at once, or it made none),
  // the driver goes on; if it waits for a reply, this drive ends and the
  // reply (a task of this same owner, so never while this round runs) ends
  // the action and plans the instance again. No lock: both sides run on the
  // owner, asserted.
  struct Inline {
    bool returned = false;
    std::optional<Next> next;
  };
  auto state = std::make_shared<Inline>();
  auto mark = std::make_shared<StepMark>(std::move(here_mark));
  StepRunner::Done later = StepEnd(id, mark, /*recovered=*/true);
  StepRunner::Done done = [this, id, state, later](Next n) {
    CheckOwner(id, "the end of a step action");
    if (!state->returned) {
      if (!state->next) state->next = n;
      return;
    }
    later(n);
  };
  try {
    RunStep(id, here, mark, done);
  } catch (...) {
    mark->Release();
    throw;
  }
  state->returned = true;
  std::optional<Next> next = state->next;
  if (!next) return Round::kDone;  // the reply goes on
  mark->Release();
  return AfterRound(id, *next);
}

auto Driver::AfterRound(const std::string& id, Next next) -> Round {
  MarkRecovered(id);
  if (next == Next::kStop) return Round::kDone;
  if (RecoveryInProgress()) return Round::kYield;
  return Round::kAgain;
}

auto Driver::SagaTransition(const SagaDefinitionPtr& def, const Action& a) -> Mutation {
  switch (a.kind) {
    case ActionKind::kStartCompensation:
      return [def, a](Tx& tx) {
        return GiveUp(tx, *def, "step '" + def->steps[a.step].name + "' failed");
      };
    case ActionKind::kComplete:
      return [](Tx& tx) { return tx.Saga(SagaEvent::kComplete); };
    case ActionKind::kFinishCompensation:
      return [](Tx& tx) { return tx.Saga(SagaEvent::kFinishCompensation); };
    case ActionKind::kAwaitApproval:
      return [def](Tx& tx) -> Status {
        if (NextAction(*def, tx.inst()).kind != ActionKind::kAwaitApproval)
          return MovedOn("moved on");
        return tx.Saga(SagaEvent::kWaitForApproval);
      };
    case ActionKind::kEscalate:
      return [def, a](Tx& tx) -> Status {
        if (NextAction(*def, tx.inst()).kind != ActionKind::kEscalate) return MovedOn("moved on");
        const StepState& st = tx.inst().step(a.step);
        bool undo = st.machine.reviewing_compensation();
        return tx.Saga(
            SagaEvent::kEscalate,
            {{"reason", (undo ? "compensation of '" : "step '") + st.name +
                            "' needs review: " + (undo ? st.comp_last_error : st.last_error)},
             {"step", st.name}});
      };
    case ActionKind::kGoForward:
      return [def](Tx& tx) { return GoForward(tx, *def); };
    default:
      return nullptr;
  }
}

auto Driver::HasApprovalRequest(const std::vector<Action>& actions) -> bool {
  for (const Action& a : actions)
    if (a.kind == ActionKind::kRequestApproval) return true;
  return false;
}

auto Driver::RequestApprovals(Tx& tx, const SagaDefinition& def, const std::vector<Action>& actions)
    -> Status {
  for (const Action& a : actions) {
    if (a.kind != ActionKind::kRequestApproval) continue;
    if (tx.inst().status() != SagaStatus::kRunning ||
        tx.inst().step(a.step).status() != StepStatus::kPlanned)
      return MovedOn("moved on");
    SAGAD_RETURN_IF_ERROR(tx.Step(a.step, StepEvent::kRequestApproval));
  }
  if (NextAction(def, tx.inst()).kind == ActionKind::kAwaitApproval)
    return tx.Saga(SagaEvent::kWaitForApproval);
  return Status::Ok();
}

auto Driver::LaunchSteps(const std::string& id, const SagaDefinition& def, const Instance& inst,
                         const std::vector<Action>& actions, int64_t wake_at, Action* here,
                         StepMark* mark) -> bool {
  *here = Action{};
  const bool chain = def.IsChain() || RecoveryInProgress();
  const int64_t now = clock_.NowMillis();
  int64_t wake = wake_at;
  bool launched = false;
  for (const Action& a : actions) {
    if (!IsStepAction(a.kind)) continue;
    int64_t due = inst.step(a.step).retry_at;
    if (due > now) {
      EarliestWake(due, &wake);  // policies/deadlines.h
      continue;
    }
    StepMark m = runs_.TryMarkStep(id, a.step, def.max_parallel);
    if (!m) continue;
    launched = true;
    if (chain && here->kind == ActionKind::kNone) {
      *here = a;
      *mark = std::move(m);
      continue;
    }
    auto held = std::make_shared<StepMark>(std::move(m));
    executor_.PostTo(id, [this, id, a, held] { RunStepTask(id, a, held); });
  }
  if (wake > 0) WakeAt(id, wake);
  return launched;
}

auto Driver::RunStepTask(const std::string& id, Action a, const std::shared_ptr<StepMark>& mark)
    -> void {
  CheckOwner(id, "a step action");
  StepRunner::Done done = StepEnd(id, mark, /*recovered=*/true);
  try {
    RunStep(id, a, mark, done);
  } catch (const std::exception& e) {
    EngineLog(LogLevel::kError,
              {{"msg", "step task error"}, {"instance", id}, {"error", e.what()}});
    ScheduleAfter(id, 5000);
    done(Next::kStop);
  }
}

auto Driver::RunStep(const std::string& id, const Action& a, const std::shared_ptr<StepMark>& mark,
                     const StepRunner::Done& done) -> void {
  if (runs_.Stopping() || !ownership_.Held(id)) return done(Next::kStop);
  auto inst = repo_.Load(id);
  if (!inst.ok()) return done(Next::kContinue);  // the driver says why
  SagaDefinitionPtr def = defs_.For(**inst);
  if (!def) return done(Next::kContinue);
  // Still wanted? The instance may have moved on since it was planned.
  bool wanted = false;
  for (const Action& b : NextActions(*def, **inst))
    wanted = wanted || (b.kind == a.kind && b.step == a.step);
  if (!wanted) return done(Next::kContinue);
  switch (a.kind) {
    case ActionKind::kExecute:
      return steps_.Execute(id, def, *inst, a.step, mark, done);
    case ActionKind::kReconcile:
      return steps_.Reconcile(id, def, *inst, a.step, mark, done);
    case ActionKind::kCompensate:
      return steps_.Compensate(id, def, *inst, a.step, mark, done);
    case ActionKind::kReconcileCompensation:
      return steps_.ReconcileCompensation(id, def, *inst, a.step, mark, done);
    default:
      return done(Next::kContinue);
  }
}

auto Driver::RecoveryInProgress() -> bool { return recovery_.InProgress(clock_.SteadyNow()); }

auto Driver::MarkRecovered(const std::string& id) -> void {
  auto secs = recovery_.Resumed(id, clock_.SteadyNow());
  if (!secs) return;
  metrics_.RecoveryLatency(*secs);
  EngineLog(LogLevel::kDebug, {{"msg", "recovered"}, {"instance", id}, {"ms", *secs * 1000}});
}

auto Driver::EnsureOwned(const std::string& id) -> bool {
  switch (ownership_.Acquire(id)) {
    case Ownership::Take::kAlreadyHeld:
      return true;
    case Ownership::Take::kRefused:
      return false;
    case Ownership::Take::kTaken:
      break;
  }
  repo_.Evict(id);  // a new generation: what another owner did since counts
  EngineLog(LogLevel::kDebug,
            {{"msg", "lease acquired"}, {"instance", id}, {"generation", ownership_.Token(id)}});
  return true;
}

}  // namespace sagad
