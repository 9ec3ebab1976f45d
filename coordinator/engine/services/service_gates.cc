#include "coordinator/engine/services/service_gates.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace sagad {

namespace {
std::string WaitingKey(const std::string& id, const std::string& step) { return id + "\n" + step; }
}  // namespace

ServiceGates::ServiceGates(const Adapter& adapter, const Clock& clock)
    : adapter_(adapter), clock_(clock) {}

void ServiceGates::SetWake(Wake wake) {
  MutexLock l(mu_);
  wake_ = std::move(wake);
}

ServiceGates::Permit::Permit(Permit&& other) noexcept
    : gates_(other.gates_), service_(std::move(other.service_)) {
  other.gates_ = nullptr;
}

ServiceGates::Permit& ServiceGates::Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    Release();
    gates_ = other.gates_;
    service_ = std::move(other.service_);
    other.gates_ = nullptr;
  }
  return *this;
}

ServiceGates::Permit::~Permit() { Release(); }

void ServiceGates::Permit::Release() {
  if (!gates_) return;
  ServiceGates* g = gates_;
  gates_ = nullptr;
  g->Released(service_);
}

ServiceGates::Gate& ServiceGates::GateLocked(const std::string& service) { return gates_[service]; }

int64_t ServiceGates::ReserveRetry(const std::string& service) {
  const ServiceConfig* svc = adapter_.Service(service);
  const int64_t now = clock_.NowMillis();
  MutexLock l(mu_);
  Gate& g = GateLocked(service);
  if (!g.retry_budget) g.retry_budget.emplace(svc ? svc->retry_budget : RetryBudgetConfig{}, now);
  return g.retry_budget->Reserve(now);
}

bool ServiceGates::TakeTokenLocked(Gate& g, double rate, int64_t now, int64_t* retry_ms) {
  const double capacity = std::max(1.0, rate);
  if (g.refilled_at < 0) {
    g.tokens = capacity;
  } else if (now > g.refilled_at) {
    g.tokens = std::min(capacity, g.tokens + rate * double(now - g.refilled_at) / 1000.0);
  }
  g.refilled_at = std::max(g.refilled_at, now);
  constexpr double kEpsilon = 1e-9;  // refills of whole milliseconds add up to whole tokens
  if (g.tokens >= 1.0 - kEpsilon) {
    g.tokens = std::max(0.0, g.tokens - 1.0);
    return true;
  }
  *retry_ms = std::max<int64_t>(1, int64_t(std::ceil((1.0 - g.tokens) * 1000.0 / rate - kEpsilon)));
  return false;
}

std::optional<ServiceGates::Permit> ServiceGates::TryAcquire(const std::string& service,
                                                             const std::string& id,
                                                             const std::string& step,
                                                             int64_t* retry_ms) {
  const ServiceConfig* svc = adapter_.Service(service);
  const int max_in_flight = svc ? svc->max_in_flight : 0;
  const double rate = svc ? svc->max_per_second : 0;
  const int64_t now = clock_.NowMillis();
  MutexLock l(mu_);
  Gate& g = GateLocked(service);
  *retry_ms = 1000;
  bool refused = g.paused || (max_in_flight > 0 && g.reserved >= max_in_flight);
  if (!refused && rate > 0 && !TakeTokenLocked(g, rate, now, retry_ms)) refused = true;
  if (refused) {
    NoteWaitingLocked(service, id, step, now);
    if (!g.paused && max_in_flight > 0 && g.reserved >= max_in_flight &&
        std::find(g.woken_next.begin(), g.woken_next.end(), id) == g.woken_next.end())
      g.woken_next.push_back(id);
    return std::nullopt;
  }
  waiting_.erase(WaitingKey(id, step));
  ++g.reserved;
  return Permit(this, service);
}

bool ServiceGates::Open(const std::string& service) const {
  const ServiceConfig* svc = adapter_.Service(service);
  if (svc && (svc->max_in_flight > 0 || svc->max_per_second > 0)) return false;
  return !Paused(service);
}

void ServiceGates::Released(const std::string& service) {
  std::string next;
  Wake wake;
  {
    MutexLock l(mu_);
    Gate& g = GateLocked(service);
    --g.reserved;
    if (!g.woken_next.empty()) {
      next = g.woken_next.front();
      g.woken_next.erase(g.woken_next.begin());
      wake = wake_;
    }
  }
  if (wake && !next.empty()) wake(next);
}

void ServiceGates::SetPaused(const std::vector<std::string>& paused) {
  std::set<std::string> now(paused.begin(), paused.end());
  std::vector<std::string> resumed;
  {
    MutexLock l(mu_);
    for (auto& [name, g] : gates_)
      if (g.paused && !now.count(name)) resumed.push_back(name);
  }
  for (const auto& name : now) Pause(name, true);
  for (const auto& name : resumed) Pause(name, false);
}

void ServiceGates::Pause(const std::string& service, bool paused) {
  std::vector<std::string> woken;
  Wake wake;
  {
    MutexLock l(mu_);
    Gate& g = GateLocked(service);
    if (g.paused == paused) return;
    g.paused = paused;
    if (paused) return;
    // Resumed: every step that waited for the service asks again now.
    std::set<std::string> ids;
    for (const auto& [key, w] : waiting_)
      if (w.service == service) ids.insert(key.substr(0, key.find('\n')));
    woken.assign(ids.begin(), ids.end());
    wake = wake_;
  }
  if (wake)
    for (const auto& id : woken) wake(id);
}

bool ServiceGates::Paused(const std::string& service) const {
  MutexLock l(mu_);
  auto it = gates_.find(service);
  return it != gates_.end() && it->second.paused;
}

void ServiceGates::NoteWaitingLocked(const std::string& service, const std::string& id,
                                     const std::string& step, int64_t now) {
  waiting_[WaitingKey(id, step)] = Waiting{service, now};
  // Forget steps that stopped asking (they moved on: cancelled, resolved);
  // a sweep at most once a second, so that many waiters cost little.
  if (now - swept_at_ < 1000) return;
  swept_at_ = now;
  for (auto it = waiting_.begin(); it != waiting_.end();)
    it = now - it->second.asked_at > kForgetWaitingMs ? waiting_.erase(it) : std::next(it);
}

std::string ServiceGates::WaitingFor(const std::string& id, const std::string& step) const {
  const int64_t now = clock_.NowMillis();
  MutexLock l(mu_);
  auto it = waiting_.find(WaitingKey(id, step));
  if (it == waiting_.end() || now - it->second.asked_at > kForgetWaitingMs) return "";
  return it->second.service;
}

int ServiceGates::QueuedLocked(const std::string& service, int64_t now) const {
  int n = 0;
  for (const auto& [key, w] : waiting_)
    if (w.service == service && now - w.asked_at <= kForgetWaitingMs) ++n;
  return n;
}

void ServiceGates::CallStarted(const std::string& service) {
  MutexLock l(mu_);
  ++GateLocked(service).calls;
}

void ServiceGates::CallEnded(const std::string& service) {
  MutexLock l(mu_);
  --GateLocked(service).calls;
}

std::vector<ServiceGates::View> ServiceGates::Views() const {
  std::set<std::string> names;
  for (const auto& n : adapter_.ServiceNames()) names.insert(n);
  const int64_t now = clock_.NowMillis();
  std::vector<View> out;
  MutexLock l(mu_);
  for (const auto& [name, g] : gates_)
    if (g.paused) names.insert(name);
  for (const auto& name : names) {
    View v;
    v.name = name;
    if (const ServiceConfig* svc = adapter_.Service(name)) {
      v.max_in_flight = svc->max_in_flight;
      v.max_per_second = svc->max_per_second;
      v.max_connections = svc->max_connections;
    }
    auto it = gates_.find(name);
    if (it != gates_.end()) {
      v.paused = it->second.paused;
      v.in_flight = it->second.calls;
    }
    v.queued = QueuedLocked(name, now);
    out.push_back(v);
  }
  return out;
}

}  // namespace sagad
