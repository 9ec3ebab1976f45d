#include "coordinator/ownership.h"

#include <cstdio>
#include <random>

namespace sagad {
namespace {

std::string Incarnation() {
  std::random_device rd;
  char buf[20];
  snprintf(buf, sizeof buf, "%016llx",
           static_cast<unsigned long long>(rd()) << 32 |
               static_cast<unsigned long long>(rd()));
  return buf;
}

}  // namespace

Ownership::Ownership(Store& store, const Clock& clock,
                     const std::string& coordinator_id, int64_t lease_ms)
    : store_(store),
      clock_(clock),
      coordinator_id_(coordinator_id),
      owner_(coordinator_id + "/" + Incarnation()),
      lease_ms_(lease_ms) {}

std::optional<Lease> Ownership::Held(const std::string& id) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = held_.find(id);
  if (it == held_.end()) return std::nullopt;
  return it->second;
}

uint64_t Ownership::Token(const std::string& id) const {
  auto l = Held(id);
  return l ? l->generation : 0;
}

Ownership::Take Ownership::Acquire(const std::string& id) {
  if (Held(id)) return Take::kAlreadyHeld;
  auto lease = store_.AcquireLease(id, owner_, clock_.NowMillis(), lease_ms_,
                                   coordinator_id_ + "/");
  if (!lease.ok()) return Take::kRefused;
  Adopt(id, *lease);
  return Take::kTaken;
}

size_t Ownership::AcquireAll(const std::vector<std::string>& ids) {
  auto taken = store_.AcquireLeases(ids, owner_, clock_.NowMillis(), lease_ms_,
                                    coordinator_id_ + "/");
  if (!taken.ok()) return 0;
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [id, lease] : *taken) held_[id] = lease;
  return taken->size();
}

void Ownership::Adopt(const std::string& id, const Lease& lease) {
  std::lock_guard<std::mutex> l(mu_);
  held_[id] = lease;
}

Lease Ownership::FirstLease() const {
  return Lease{owner_, clock_.NowMillis() + lease_ms_, 1};
}

void Ownership::Release(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  held_.erase(id);
}

StatusOr<std::vector<std::string>> Ownership::Renew() {
  const int64_t now = clock_.NowMillis();
  std::vector<std::string> mine;
  {
    std::lock_guard<std::mutex> l(mu_);
    mine.reserve(held_.size());
    for (const auto& [id, lease] : held_) mine.push_back(id);
  }
  if (mine.empty()) return mine;
  auto lost = store_.RenewLeases(owner_, mine, now, lease_ms_);
  if (!lost.ok()) return lost.status();
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& id : *lost) held_.erase(id);
  for (const auto& id : mine) {
    auto it = held_.find(id);
    if (it != held_.end()) it->second.expires_at = now + lease_ms_;
  }
  return lost;
}

size_t Ownership::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return held_.size();
}

}  // namespace sagad
