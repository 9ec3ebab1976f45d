// LmdbStore's group commit (GroupCommit: leader/follower, and a committer
// thread for CommitAsync): the leader writes everything queued in one LMDB
// transaction (checks first, so a refused write changes nothing; no nested
// transactions, which cost LMDB a 2 MiB allocation each) with one fsync.
#include <exception>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "coordinator/store/lmdb/lmdb_util.h"

namespace sagad {
using namespace lmdb_util;

void LmdbStore::CommitAsync(std::shared_ptr<const TransitionWrite> w,
                            std::function<void(Status)> done) {
  auto r = std::make_unique<CommitRequest>(WriteKind::kTransition, w->id, w->expected_version,
                                           &w->snapshot, &w->events, &w->operations, nullptr,
                                           &w->outbox, w->fence ? &*w->fence : nullptr);
  r->keep = std::move(w);
  QueueAsync(std::move(r), std::move(done));
}

void LmdbStore::QueueAsync(std::unique_ptr<CommitRequest> r, std::function<void(Status)> done) {
  Status prepared = Prepare(*r);
  if (!prepared.ok()) {
    r.reset();
    done(prepared);
    return;
  }
  r->then = std::move(done);
  group_.CommitAsync(std::move(r));
}

void LmdbStore::WriteBatch(const std::vector<GroupCommit::Write*>& writes) {
  std::vector<CommitRequest*> batch;
  batch.reserve(writes.size());
  for (GroupCommit::Write* w : writes) batch.push_back(static_cast<CommitRequest*>(w));
  // Nothing may leave by an exception: every write of the batch gets its
  // result, or its writer would wait forever.
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
  if (!batch_status.ok())
    for (CommitRequest* w : batch) w->result = batch_status;
}

}  // namespace sagad
