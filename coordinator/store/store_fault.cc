#include "coordinator/store/store_fault.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "util/log.h"

namespace sagad {
namespace {

int64_t SteadyMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

uint64_t RandomU64() {
  static Mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  MutexLock l(mu);
  return rng();
}

std::string NewErrorReference() {
  const uint64_t r = RandomU64();
  char buf[24];
  std::snprintf(buf, sizeof buf, "ref-%012llx",
                static_cast<unsigned long long>(r & 0xffffffffffffULL));
  return buf;
}

Status StoreFault(const std::string& store, const std::string& details) {
  std::string ref = NewErrorReference();
  EngineLog(LogLevel::kError,
            {{"msg", "store failure"}, {"store", store}, {"error", details}, {"reference", ref}});
  return Unavailable("the " + store + " store failed (" + ref +
                     " in the coordinator's log); retry later");
}

void FaultWindow::Note(const Status& fault) {
  MutexLock l(mu_);
  last_ = fault.message();
  last_ms_ = SteadyMillis();
}

Status FaultWindow::Recent(int64_t window_ms) const {
  int64_t last = last_ms_.load();
  if (last == 0 || SteadyMillis() - last >= window_ms) return Status::Ok();
  MutexLock l(mu_);
  return Unavailable("a store operation failed " + std::to_string((SteadyMillis() - last) / 1000) +
                     " s ago: " + last_);
}

}  // namespace sagad
