// ThreadRole: what a thread is for, marked when it starts, and the rule that
// follows from it. Threads that serve everyone (the store's committer, the
// HTTP event loops, the engine's workers) must never wait for a commit or a
// downstream call: one such wait can hold up every instance, and a committer
// that waits for a commit waits for itself (the keyed-wait hang:
// a commit's continuation stored a submission's response with a blocking
// commit that only the committer could write).
//
// CheckMayBlock is called by every blocking commit and every blocking
// downstream call. It is an assertion that stays on in production: on a
// thread whose role forbids waiting it aborts with one line naming the role
// and what was about to wait (util/check.h: a coordinator whose own rules are
// broken stops; the next start recovers everything durable).
// Thread-safety: each thread reads and sets its own mark only.
#pragma once

namespace sagad {

enum class ThreadRole {
  kUnmarked,   // may block (housekeeping threads, which run HTTP handlers, tests)
  kCommitter,  // a store's committer thread: writes batches, runs continuations
  kHttpLoop,   // an HTTP event loop (sockets of many clients)
  kWorker,     // an engine worker (CPU work of every instance)
};

// The text of a role (for the abort message and the logs).
const char* ThreadRoleName(ThreadRole role);
// True for the roles that must not wait for a commit or a downstream call.
bool MustNotBlock(ThreadRole role);

// Names the calling thread as ps -L, top -H and /proc/PID/task/*/comm show
// it (cut to 15 bytes): "sagad-shard-0", "sagad-commit", ... so an operator
// sees which part of sagad spends the CPU.
void NameThread(const char* name);

// Marks the calling thread; call it first thing in the thread's body.
void MarkThread(ThreadRole role);
ThreadRole CurrentThreadRole();

// Aborts the process if the calling thread must not block. `what` names
// the wait ("a blocking store commit", "a blocking downstream call").
void CheckMayBlock(const char* what);

// Marks the calling thread for the lifetime of the object and restores
// the previous mark after (a test, or an executor that runs one task).
class ScopedThreadRole {
 public:
  explicit ScopedThreadRole(ThreadRole role) : previous_(CurrentThreadRole()) { MarkThread(role); }
  ~ScopedThreadRole() { MarkThread(previous_); }
  ScopedThreadRole(const ScopedThreadRole&) = delete;
  ScopedThreadRole& operator=(const ScopedThreadRole&) = delete;

 private:
  ThreadRole previous_;
};

}  // namespace sagad
