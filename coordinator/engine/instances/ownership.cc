#include "coordinator/engine/instances/ownership.h"

#include <algorithm>
#include <cstdio>

#include "util/check.h"

namespace sagad {
namespace {

std::string Incarnation(Random& random) {
  char buf[20];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(random.Next()));
  return buf;
}

}  // namespace

Ownership::Ownership(Store& store, const Clock& clock, const std::string& coordinator_id,
                     int64_t lease_ms, Random& random)
    : store_(store),
      clock_(clock),
      coordinator_id_(coordinator_id),
      owner_(coordinator_id + "/" + Incarnation(random)),
      lease_ms_(lease_ms) {}

std::optional<Lease> Ownership::Held(const std::string& id) const {
  MutexLock l(mu_);
  auto it = held_.find(id);
  if (it == held_.end()) return std::nullopt;
  return it->second;
}

uint64_t Ownership::Token(const std::string& id) const {
  auto l = Held(id);
  return l ? l->generation : 0;
}

Lease Ownership::Believed(Lease lease, int64_t asked_at) const {
  lease.expires_at = std::min(lease.expires_at, asked_at + lease_ms_);
  return lease;
}

Ownership::Take Ownership::Acquire(const std::string& id) {
  if (Held(id)) return Take::kAlreadyHeld;
  const int64_t asked_at = clock_.NowMillis();
  auto lease = store_.AcquireLease(id, owner_, clock_, lease_ms_, coordinator_id_ + "/");
  if (!lease.ok()) return Take::kRefused;
  Adopt(id, Believed(*lease, asked_at));
  return Take::kTaken;
}

size_t Ownership::AcquireAll(const std::vector<std::string>& ids) {
  const int64_t asked_at = clock_.NowMillis();
  auto taken = store_.AcquireLeases(ids, owner_, clock_, lease_ms_, coordinator_id_ + "/");
  if (!taken.ok()) return 0;
  MutexLock l(mu_);
  for (const auto& [id, lease] : *taken) held_[id] = Believed(lease, asked_at);
  return taken->size();
}

Status Ownership::ReadyToSend(const std::string& id) {
  Status now = SendableNow(id);
  if (now.ok() || !Held(id)) return now;  // enough left, or not the owner
  const int64_t margin = lease_ms_ / 3;
  const int64_t asked_at = clock_.NowMillis();
  auto lost = RenewIds({id});
  if (!lost.ok())
    return Unavailable("the lease of " + id +
                       " could not be renewed before a send: " + lost.status().message());
  if (!lost->empty() || !Held(id))
    return LeaseLost("lease lost: " + id + " is owned by another process");
  if (asked_at + lease_ms_ - clock_.NowMillis() < margin)
    return Unavailable("renewing the lease of " + id + " took too long to send now");
  return Status::Ok();
}

Status Ownership::SendableNow(const std::string& id) const {
  auto held = Held(id);
  if (!held) return LeaseLost("lease lost: not the owner of " + id);
  const int64_t left = held->expires_at - clock_.NowMillis();
  if (left >= lease_ms_ / 3) return Status::Ok();
  return LeaseLost("lease of " + id + " has " + std::to_string(left) +
                   " ms left, under lease_ms/3: withheld at the connection line");
}

void Ownership::Adopt(const std::string& id, const Lease& lease) {
  MutexLock l(mu_);
  auto it = held_.find(id);
  // Fencing tokens never go down for one instance: a downstream that keeps
  // the highest it saw would otherwise refuse this owner, or worse, obey an
  // older one.
  SAGAD_CHECK(it == held_.end() || lease.generation >= it->second.generation)
      << "instance " << id << ": generation " << lease.generation << " after "
      << it->second.generation;
  held_[id] = lease;
}

void Ownership::AdoptFirst(const std::string& id, const Lease& first) {
  MutexLock l(mu_);
  held_.try_emplace(id, first);  // a later lease taken meanwhile stands
}

Lease Ownership::FirstLease() const { return Lease{owner_, clock_.NowMillis() + lease_ms_, 1}; }

void Ownership::Release(const std::string& id) {
  MutexLock l(mu_);
  held_.erase(id);
  ForgetRefusalsLocked(id);
}

void Ownership::ForgetRefusalsLocked(const std::string& id) {
  if (refused_.erase(id) == 1) any_refused_ = !refused_.empty();
}

int Ownership::CountRefusedCommit(const std::string& id) {
  MutexLock l(mu_);
  any_refused_ = true;
  return ++refused_[id];
}

void Ownership::ClearRefusedCommits(const std::string& id) {
  if (!any_refused_) return;  // the usual case: no lock
  MutexLock l(mu_);
  ForgetRefusalsLocked(id);
}

StatusOr<std::vector<std::string>> Ownership::Renew() {
  std::vector<std::string> mine;
  {
    MutexLock l(mu_);
    mine.reserve(held_.size());
    for (const auto& [id, lease] : held_) mine.push_back(id);
  }
  if (mine.empty()) return mine;
  return RenewIds(mine);
}

StatusOr<std::vector<std::string>> Ownership::RenewIds(const std::vector<std::string>& ids) {
  const int64_t asked_at = clock_.NowMillis();
  auto lost = store_.RenewLeases(owner_, ids, clock_, lease_ms_);
  if (!lost.ok()) return lost.status();
  // Not renewed because its instance finished meanwhile (its last commit
  // released the lease): let go, but that is no loss to report.
  std::vector<std::string> released, taken;
  for (const auto& id : *lost) {
    auto lease = store_.GetLease(id);
    bool free =
        lease.status().code() == StatusCode::kNotFound || (lease.ok() && lease->owner.empty());
    (free ? released : taken).push_back(id);
  }
  MutexLock l(mu_);
  for (const auto* gone : {&released, &taken})
    for (const auto& id : *gone) {
      held_.erase(id);
      ForgetRefusalsLocked(id);
    }
  for (const auto& id : ids) {
    auto it = held_.find(id);
    if (it != held_.end())
      it->second.expires_at = std::max(it->second.expires_at, asked_at + lease_ms_);
  }
  return taken;
}

size_t Ownership::size() const {
  MutexLock l(mu_);
  return held_.size();
}

}  // namespace sagad
