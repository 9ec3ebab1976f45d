// LmdbStore's group commit: every write queues; the one at the front of the
// queue leads: it writes everything queued in one LMDB transaction (checks
// first, so a refused write changes nothing; no nested transactions, which
// cost LMDB a 2 MiB allocation each) with one fsync, marks the batch done
// and wakes each of its writers and the next leader. A blocking caller
// (Commit, CreateInstance, SetSubmissionResponse) leads when its own write
// is at the front and returns once that write is durable; a CommitAsync
// write at the front is led by the committer thread. Whoever led a batch
// calls its CommitAsync continuations after it, outside the lock.
#include <exception>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "coordinator/store/lmdb/lmdb_util.h"
#include "util/check.h"

namespace sagad {
using namespace lmdb_util;

Status LmdbStore::GroupCommit(CommitRequest& r) {
  MutexLock l(group_mu_);
  group_queue_.push_back(&r);
  r.cv->Wait(group_mu_, [&]() REQUIRES(group_mu_) {
    return r.done || (!leading_ && group_queue_.front() == &r);
  });
  if (r.done) return r.result;
  Finished f = LeadBatch();
  l.Unlock();
  Complete(f);
  return r.result;
}

void LmdbStore::CommitAsync(std::shared_ptr<const TransitionWrite> w,
                            std::function<void(Status)> done) {
  auto* r = new CommitRequest(WriteKind::kTransition, w->id, w->expected_version, w->snapshot.get(),
                              &w->events, &w->operations, nullptr, &w->outbox,
                              w->fence ? &*w->fence : nullptr);
  r->keep = std::move(w);
  Status prepared = Prepare(*r);
  if (!prepared.ok()) {
    delete r;
    done(prepared);
    return;
  }
  r->then = std::move(done);
  MutexLock l(group_mu_);
  SAGAD_CHECK(!stopping_) << "CommitAsync on a store that is closing";
  if (!committer_.joinable()) committer_ = std::thread([this] { CommitterLoop(); });
  group_queue_.push_back(r);
  if (!leading_ && group_queue_.front() == r) committer_cv_.NotifyOne();
}

// Leads every batch whose front is a CommitAsync; at the end, the queue is
// drained before the thread ends.
void LmdbStore::CommitterLoop() {
  MutexLock l(group_mu_);
  for (;;) {
    committer_cv_.Wait(group_mu_, [&]() REQUIRES(group_mu_) {
      return (!leading_ && !group_queue_.empty() && group_queue_.front()->then) ||
             (stopping_ && group_queue_.empty());
    });
    if (group_queue_.empty()) return;  // stopping, nothing left
    Finished f = LeadBatch();
    l.Unlock();
    Complete(f);
    l.Lock();
  }
}

auto LmdbStore::LeadBatch() -> Finished {
  leading_ = true;
  std::vector<CommitRequest*> batch(group_queue_.begin(), group_queue_.end());
  group_mu_.Unlock();
  // Nothing may leave this block by an exception: the batch must always be
  // marked done and popped below, or every later writer would wait forever.
  Status batch_status;
  try {
    Txn txn(env_, true, &synced_commits_);
    batch_status = txn.rc() == 0 ? Status::Ok() : LmdbError("mdb_txn_begin", txn.rc());
    for (CommitRequest* w : batch) {
      if (!batch_status.ok()) break;
      w->result = Check(txn.get(), *w);
      if (w->result.ok()) batch_status = Write(txn.get(), *w);
    }
    if (batch_status.ok()) {
      int rc = txn.Commit();  // the one fsync of the batch
      if (rc != 0) batch_status = LmdbError("mdb_txn_commit", rc);
    }
  } catch (const std::exception& e) {  // the transaction is aborted: nothing was written
    batch_status = Internal(std::string("write refused: ") + e.what());
  }
  // /readyz says 503 from a write refused for lack of space until a new
  // instance fits again (or CheckWritable's probe finds room). A smaller
  // write that fits (a step's transition rewriting its snapshot in place)
  // does not mean a submission would.
  if (batch_status.code() == StatusCode::kUnavailable)
    full_ = true;
  else if (batch_status.ok() && full_)
    for (const CommitRequest* w : batch)
      if (w->kind == WriteKind::kCreate && w->result.ok()) full_ = false;
  Finished f;
  f.wake.reserve(batch.size() + 1);
  group_mu_.Lock();
  for (CommitRequest* w : batch) {
    group_queue_.pop_front();
    if (!batch_status.ok()) w->result = batch_status;
    w->done = true;
    if (w->then)
      f.then.push_back(w);
    else
      f.wake.push_back(w->cv);  // the leader's own too: harmless, it is not waiting
  }
  leading_ = false;
  if (!group_queue_.empty() && !group_queue_.front()->then)
    f.wake.push_back(group_queue_.front()->cv);
  else if (!group_queue_.empty() || stopping_)
    committer_cv_.NotifyOne();
  return f;
}

void LmdbStore::Complete(Finished& f) {
  for (const auto& cv : f.wake) cv->NotifyOne();
  for (CommitRequest* w : f.then) {
    std::unique_ptr<CommitRequest> owned(w);
    auto then = std::move(owned->then);
    Status result = owned->result;
    owned.reset();  // the write's data goes before its continuation runs
    then(result);
  }
}

void LmdbStore::StopCommitter() {
  {
    MutexLock l(group_mu_);
    stopping_ = true;
  }
  committer_cv_.NotifyOne();
  if (committer_.joinable()) committer_.join();
}

}  // namespace sagad
