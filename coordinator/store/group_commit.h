// GroupCommit: queued writes that share one transaction and one flush (the
// LMDB and PostgreSQL stores' group commit). Leader/follower, as leveldb's
// DBImpl::Write: a blocking writer (Commit) at the front of the queue
// writes everything queued itself, so a lone writer pays no thread switch;
// an asynchronous writer (CommitAsync) at the front is led by the queue's
// committer thread, started by the first one. Whoever led a batch wakes its
// blocking writers and the next leader, and then calls the batch's
// continuations, outside the lock.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "util/mutex.h"
#include "util/status.h"

namespace sagad {

class GroupCommit {
 public:
  // One queued write; a store derives its own with what it writes.
  struct Write {
    virtual ~Write() = default;
    Status result;  // set by the Writer
    // The fields below belong to the queue (guarded by its mutex).
    bool done = false;
    std::function<void(Status)> then;  // CommitAsync's continuation
    // Signalled when done or when it leads; shared so that the leader can
    // signal it after letting go of the mutex (a woken follower then does
    // not block on it), even if the follower already saw `done` and left.
    std::shared_ptr<CondVar> cv = std::make_shared<CondVar>();
  };
  // Writes a batch in one transaction and sets each write's result. Called
  // by one leader at a time, without the queue's lock. Must not throw.
  using Writer = std::function<void(const std::vector<Write*>& batch)>;

  explicit GroupCommit(Writer writer) : writer_(std::move(writer)) {}
  ~GroupCommit() { Stop(); }
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Queues w and returns its result once it is written (or refused).
  Status Commit(Write& w);
  // Queues w; w->then(result) runs once, after it is written (or refused).
  void CommitAsync(std::unique_ptr<Write> w);
  // Writes what is queued, then ends the committer thread. No CommitAsync
  // may come after.
  void Stop();
  // How long writes have waited with none finished: 0 when nothing is
  // queued, else the time since the later of the last batch's end and the
  // moment the queue stopped being empty (the store watchdog).
  std::chrono::milliseconds Stalled() const;

 private:
  struct Finished {
    std::vector<std::shared_ptr<CondVar>> wake;
    std::vector<Write*> then;  // owned: deleted once completed
  };
  // Writes every queued write (mu_ let go meanwhile), marks them done and
  // wakes the next leader; what to signal and complete once mu_ is let go.
  Finished LeadBatch() REQUIRES(mu_);
  static void Complete(Finished& f);
  void CommitterLoop();

  const Writer writer_;
  mutable Mutex mu_;
  std::deque<Write*> queue_ GUARDED_BY(mu_);  // front: the next leader
  bool leading_ GUARDED_BY(mu_) = false;      // a batch is being written
  bool stopping_ GUARDED_BY(mu_) = false;
  // The last batch's end, or when the queue stopped being empty (Stalled).
  std::chrono::steady_clock::time_point progress_ GUARDED_BY(mu_);
  CondVar committer_cv_;   // a CommitAsync is at the front, or stop
  std::thread committer_;  // started by the first CommitAsync (under mu_)
};

}  // namespace sagad
