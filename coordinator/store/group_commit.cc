#include "coordinator/store/group_commit.h"

#include "util/check.h"
#include "util/thread_role.h"

namespace sagad {

Status GroupCommit::Commit(Write& w) {
  CheckMayBlock("a blocking store commit");
  MutexLock l(mu_);
  if (queue_.empty()) progress_ = std::chrono::steady_clock::now();
  queue_.push_back(&w);
  w.cv->Wait(mu_, [&]() REQUIRES(mu_) { return w.done || (!leading_ && queue_.front() == &w); });
  if (w.done) return w.result;
  Finished f = LeadBatch();
  l.Unlock();
  Complete(f);
  return w.result;
}

void GroupCommit::CommitAsync(std::unique_ptr<Write> w) {
  SAGAD_CHECK(w->then) << "CommitAsync without a continuation";
  MutexLock l(mu_);
  SAGAD_CHECK(!stopping_) << "CommitAsync on a store that is closing";
  if (!committer_.joinable()) committer_ = std::thread([this] { CommitterLoop(); });
  Write* raw = w.release();
  if (queue_.empty()) progress_ = std::chrono::steady_clock::now();
  queue_.push_back(raw);
  if (!leading_ && queue_.front() == raw) committer_cv_.NotifyOne();
}

// Leads every batch whose front is a CommitAsync; ends once stopping with
// nothing queued.
void GroupCommit::CommitterLoop() {
  MarkThread(ThreadRole::kCommitter);
  NameThread("sagad-commit");
  MutexLock l(mu_);
  for (;;) {
    committer_cv_.Wait(mu_, [&]() REQUIRES(mu_) {
      return (!leading_ && !queue_.empty() && queue_.front()->then) ||
             (stopping_ && queue_.empty());
    });
    if (queue_.empty()) return;
    Finished f = LeadBatch();
    l.Unlock();
    Complete(f);
    l.Lock();
  }
}

auto GroupCommit::LeadBatch() -> Finished {
  leading_ = true;
  std::vector<Write*> batch(queue_.begin(), queue_.end());
  mu_.Unlock();
  writer_(batch);
  Finished f;
  f.wake.reserve(batch.size() + 1);
  mu_.Lock();
  for (Write* w : batch) {
    queue_.pop_front();
    w->done = true;
    if (w->then)
      f.then.push_back(w);
    else
      f.wake.push_back(w->cv);  // the leader's own too: harmless, it is not waiting
  }
  leading_ = false;
  progress_ = std::chrono::steady_clock::now();
  if (!queue_.empty() && !queue_.front()->then)
    f.wake.push_back(queue_.front()->cv);
  else if (!queue_.empty() || stopping_)
    committer_cv_.NotifyOne();
  return f;
}

void GroupCommit::Complete(Finished& f) {
  for (const auto& cv : f.wake) cv->NotifyOne();
  for (Write* w : f.then) {
    std::unique_ptr<Write> owned(w);
    auto then = std::move(owned->then);
    Status result = owned->result;
    owned.reset();  // the write's data goes before its continuation runs
    then(result);
  }
}

std::chrono::milliseconds GroupCommit::Stalled() const {
  MutexLock l(mu_);
  if (queue_.empty()) return std::chrono::milliseconds(0);
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               progress_);
}

void GroupCommit::Stop() {
  {
    MutexLock l(mu_);
    stopping_ = true;
  }
  committer_cv_.NotifyOne();
  if (committer_.joinable()) committer_.join();
}

}  // namespace sagad
