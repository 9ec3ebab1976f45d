// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// clang's thread-safety annotations, so that the compiler checks which lock
// guards which member (-Wthread-safety, the clang build in CI; GCC ignores
// the attributes). Every member a mutex guards is declared GUARDED_BY(mu_);
// every private helper that expects the lock held is REQUIRES(mu_).
//
//   mutable Mutex mu_;
//   int count_ GUARDED_BY(mu_) = 0;
//   void BumpLocked() REQUIRES(mu_) { ++count_; }
//   void Bump() { MutexLock l(mu_); BumpLocked(); }
//
// CondVar waits on a Mutex the caller holds (through its MutexLock).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define SAGAD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SAGAD_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) SAGAD_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY SAGAD_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) SAGAD_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) SAGAD_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) SAGAD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) SAGAD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) SAGAD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define EXCLUDES(...) SAGAD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS SAGAD_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace sagad {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope; Unlock() and Lock() let it go and take it again
// in between (the analysis follows both).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_.Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

class CondVar {
 public:
  // Waits until `ready()` holds; `mu` is released while waiting.
  template <typename Predicate>
  void Wait(Mutex& mu, Predicate ready) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu.mu_, std::adopt_lock);
    cv_.wait(l, ready);
    l.release();  // still held: the caller's MutexLock releases it
  }
  // The same with a deadline; the value of `ready()` at the end.
  template <typename Clock, typename Duration, typename Predicate>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline,
                 Predicate ready) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu.mu_, std::adopt_lock);
    bool ok = cv_.wait_until(l, deadline, ready);
    l.release();
    return ok;
  }
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout, Predicate ready)
      REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout, ready);
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace sagad
