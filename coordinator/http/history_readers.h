// HistoryReaders: where reads of the history run (lists and searches of
// instances, which may examine thousands of stored records), so that they
// never take the capacity of submissions, calls, approvals and health
// checks, however many operators refresh a console:
//   * their own threads (`threads`), never the API's handler threads: a
//     handler parses the request, hands the read over and returns at once
//     (the response is deferred, HttpResponse::Defer);
//   * at a lower CPU priority (nice 10): while sagad is busy the kernel
//     gives a reader about a tenth of a core against a submission's thread,
//     so reads get slower under load, writes do not;
//   * at most `max_queued` reads waiting: one more is refused at once
//     (Post answers false; the caller answers 503 with Retry-After).
// threads == 0 runs each read inside Post (the simulator, one thread).
// Thread-safety: Post and Stop may be called from any thread.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "util/mutex.h"

namespace sagad {

class HistoryReaders {
 public:
  HistoryReaders(int threads, size_t max_queued);
  ~HistoryReaders();  // Stop
  HistoryReaders(const HistoryReaders&) = delete;
  HistoryReaders& operator=(const HistoryReaders&) = delete;

  // Queues `read` (run once, on a reader thread); false when `max_queued`
  // reads wait already or the readers stopped (nothing queued).
  bool Post(std::function<void()> read);
  // Runs the reads still queued, then ends the threads. Idempotent.
  void Stop();

 private:
  void Run();

  const size_t max_queued_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace sagad
