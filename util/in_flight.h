// InFlight: how many operations a component has begun and not ended, and a
// wait for none (a shutdown waits for its commits' continuations). Begin and
// End pair up; WaitNone returns once the count is 0 (at once if it is). Go's
// sync.WaitGroup, absl's BlockingCounter without a fixed count.
// Thread-safety: every method may be called from any thread.
#pragma once

#include "util/mutex.h"

namespace sagad {

class InFlight {
 public:
  void Begin() {
    MutexLock l(mu_);
    ++n_;
  }
  void End() {
    MutexLock l(mu_);
    if (--n_ == 0) none_.NotifyAll();
  }
  void WaitNone() {
    MutexLock l(mu_);
    none_.Wait(mu_, [this]() REQUIRES(mu_) { return n_ == 0; });
  }

 private:
  Mutex mu_;
  CondVar none_;
  int n_ GUARDED_BY(mu_) = 0;
};

}  // namespace sagad
