#include "coordinator/engine/actions/waiters.h"

#include <algorithm>

#include "sagas/settled.h"

namespace sagad {

namespace {
constexpr auto kPoll = std::chrono::milliseconds(200);
}

// The members of Async that change are guarded by Waiters::mu_ (which the
// analysis cannot name from a nested struct).
struct Waiters::Async {
  std::string id;
  Done done;    // empty once called or dropped
  Until until;  // empty: Settled
  Shape shape;  // empty: the whole view
  std::chrono::steady_clock::time_point deadline;
};

Waiters::Waiters(Store& store, Executor& executor, const Clock& clock)
    : store_(store), executor_(executor), clock_(clock) {}

Waiters::~Waiters() { CancelAll(); }

// The view's counterparts of Instance::Settled and of the decided column,
// by sagas/settled.h's table.
bool Waiters::Settled(const nlohmann::json& view) {
  std::string s = view.value("status", "");
  if (s == "OPEN") {  // a run: each call settled
    const nlohmann::json& calls = view.contains("calls") ? view["calls"] : nlohmann::json();
    if (!calls.is_array()) return false;
    for (const auto& c : calls)
      if (!CallSettledName(c.value("status", ""))) return false;
    return true;
  }
  return SagaSettledName(s);
}

bool Waiters::Decided(const nlohmann::json& view) {
  const std::string s = view.value("status", "");
  if (SagaDecidedName(s)) return true;
  if (view.value("kind", "") != "run" || (s != "OPEN" && s != "AWAITING_APPROVAL")) return false;
  const nlohmann::json& calls = view.contains("calls") ? view["calls"] : nlohmann::json();
  if (!calls.is_array()) return false;
  for (const auto& c : calls)
    if (!sagad::CallDecided(c.value("status", ""))) return false;
  return true;
}

Waiters::Until Waiters::CallDecided(const std::string& call_id) {
  return [call_id](const nlohmann::json& view) {
    if (SagaDecidedName(view.value("status", ""))) return true;
    const nlohmann::json& calls = view.contains("calls") ? view["calls"] : nlohmann::json();
    if (!calls.is_array()) return true;  // not a run: nothing to wait for
    for (const auto& c : calls)
      if (c.value("call_id", "") == call_id) return sagad::CallDecided(c.value("status", ""));
    return true;  // no such call: the answer says so
  };
}

bool Waiters::Holds(const Async& w, const nlohmann::json& view) {
  return w.until ? w.until(view) : Settled(view);
}

bool Waiters::HoldsOn(const Async& w, const Instance& inst, nlohmann::json* answer) {
  if (w.shape) {
    *answer = w.shape(inst);
    return w.until ? w.until(*answer) : inst.Settled();
  }
  if (!w.until && !inst.Settled()) return false;  // no view needed to say no
  *answer = inst.ToJson();
  return Holds(w, *answer);
}

CancelWait Waiters::WaitAsync(const std::string& id, std::chrono::milliseconds timeout, Done done,
                              Until until, std::shared_ptr<const Instance> now, Shape shape) {
  auto w = std::make_shared<Async>();
  w->id = id;
  w->done = std::move(done);
  w->until = std::move(until);
  w->shape = std::move(shape);
  w->deadline = clock_.SteadyNow() + timeout;
  CancelWait drop = [this, weak = std::weak_ptr<Async>(w)] {
    auto a = weak.lock();
    return a && Drop(a);
  };
  Status closing;
  {
    MutexLock l(mu_);
    if (cancelled_) return [] { return true; };
    closing = closing_;
    if (closing.ok()) async_.emplace(id, w);
  }
  if (!closing.ok()) {
    w->done(closing);
    return [] { return false; };
  }
  if (!now) {
    Arm(w, 0);  // the store's copy, off this thread
    return drop;
  }
  // Registered first: a commit after this look wakes it (Notify), one
  // before it is in `now`.
  nlohmann::json answer;
  if (HoldsOn(*w, *now, &answer))
    Finish(w, std::move(answer));
  else if (timeout.count() <= 0)
    Finish(w, w->shape ? w->shape(*now) : now->ToJson());
  else
    Arm(w);
  return drop;
}

// Takes `w` out of the table with its `done` (empty if it was taken
// already).
Waiters::Done Waiters::TakeLocked(const std::shared_ptr<Async>& w) {
  Done done = std::move(w->done);
  w->done = nullptr;
  if (!done) return done;
  for (auto [it, end] = async_.equal_range(w->id); it != end; ++it)
    if (it->second == w) {
      async_.erase(it);
      break;
    }
  return done;
}

bool Waiters::Drop(const std::shared_ptr<Async>& w) {
  MutexLock l(mu_);
  return static_cast<bool>(TakeLocked(w));
}

void Waiters::FinishAll(const Status& why) {
  std::vector<std::shared_ptr<Async>> all;
  {
    MutexLock l(mu_);
    closing_ = why;
    for (auto& [id, w] : async_) all.push_back(w);
  }
  for (const auto& w : all) Finish(w, why);
}

// Every 200 ms (or at the deadline, if sooner): read the store on a reader
// thread; finish if settled or the time is up, else look again later.
void Waiters::Arm(const std::shared_ptr<Async>& w) {
  auto wait = std::min(
      std::chrono::ceil<std::chrono::milliseconds>(w->deadline - clock_.SteadyNow()), kPoll);
  Arm(w, std::max<int64_t>(0, wait.count()));
}

void Waiters::Arm(const std::shared_ptr<Async>& w, int64_t delay_ms) {
  executor_.PostAfter(delay_ms, [this, w] {
    {
      MutexLock l(mu_);
      if (!w->done) return;
    }
    auto j = store_.GetInstance(w->id);
    if (!j.ok() || Holds(*w, *j) || clock_.SteadyNow() >= w->deadline)
      return Finish(w, std::move(j));
    Arm(w);
  });
}

void Waiters::Finish(const std::shared_ptr<Async>& w, StatusOr<nlohmann::json> j) {
  Done done;
  {
    MutexLock l(mu_);
    done = TakeLocked(w);
    if (!done) return;
    ++running_;  // CancelAll waits for it
  }
  done(std::move(j));
  MutexLock l(mu_);
  if (--running_ == 0) idle_cv_.NotifyAll();
}

void Waiters::Notify(const std::string& id, bool settled, const Snapshot& snapshot,
                     const Instance* inst) {
  std::vector<std::shared_ptr<Async>> woken, shaped;
  {
    MutexLock l(mu_);
    for (auto [it, end] = async_.equal_range(id); it != end; ++it)
      if (inst && it->second->shape)
        shaped.push_back(it->second);
      else if (settled || it->second->until)
        woken.push_back(it->second);
    if (woken.empty() && shaped.empty()) return;
  }
  // Judged outside the table's lock (a view is built from the instance); a
  // waiter that left meanwhile is skipped by Finish.
  for (const auto& w : shaped) {
    nlohmann::json answer;
    if (HoldsOn(*w, *inst, &answer)) Finish(w, std::move(answer));
  }
  if (woken.empty()) return;
  std::shared_ptr<const nlohmann::json> view = snapshot();
  for (const auto& w : woken)
    if (w->until ? w->until(*view) : settled) Finish(w, *view);
}

void Waiters::CancelAll() {
  std::unordered_multimap<std::string, std::shared_ptr<Async>> dropped;
  {
    MutexLock l(mu_);
    cancelled_ = true;
    for (auto& [id, w] : async_) w->done = nullptr;
    dropped.swap(async_);
    idle_cv_.Wait(mu_, [&]() REQUIRES(mu_) { return running_ == 0; });
  }
}

}  // namespace sagad
