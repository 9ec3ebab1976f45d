// Store faults: failures of a store that are not the request's fault (an I/O
// error, a disk that answers EIO, a PostgreSQL schema or server that is not
// what sagad expects). They are Unavailable: 503 with Retry-After at the
// API, retried by the drivers, and /readyz says 503 while they last. What
// went wrong in detail (SQL, PL/pgSQL context, file names, system error
// text) goes to the log only, under a reference the answer carries.
// Thread-safety: all functions and methods are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "util/mutex.h"
#include "util/status.h"

namespace sagad {

// 64 random bits from one process-wide generator (seeded once from
// std::random_device): instance ids and error references.
uint64_t RandomU64();

// A fresh reference to find a log line by ("ref-" and 12 hex digits).
std::string NewErrorReference();

// Logs `details` under a new reference; Unavailable naming `store` and the
// reference only.
Status StoreFault(const std::string& store, const std::string& details);

// When the last fault of a store happened, for readiness.
class FaultWindow {
 public:
  // Records `fault` (a StoreFault's status).
  void Note(const Status& fault);
  // Unavailable (with the last fault's message) if one was noted within
  // the last `window_ms`; Ok otherwise.
  Status Recent(int64_t window_ms) const;

 private:
  std::atomic<int64_t> last_ms_{0};
  mutable Mutex mu_;
  std::string last_ GUARDED_BY(mu_);
};

}  // namespace sagad
