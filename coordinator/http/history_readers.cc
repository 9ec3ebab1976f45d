#include "coordinator/http/history_readers.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/thread_role.h"

namespace sagad {

namespace {
// A reader yields the CPU to everything else sagad does: nice 10 weighs
// about a tenth of nice 0 in the kernel's fair scheduler.
constexpr int kReaderNice = 10;
}  // namespace

HistoryReaders::HistoryReaders(int threads, size_t max_queued) : max_queued_(max_queued) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

HistoryReaders::~HistoryReaders() { Stop(); }

bool HistoryReaders::Post(std::function<void()> read) {
  if (threads_.empty()) {
    read();
    return true;
  }
  {
    MutexLock l(mu_);
    if (stopping_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(read));
  }
  cv_.NotifyOne();
  return true;
}

void HistoryReaders::Stop() {
  {
    MutexLock l(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void HistoryReaders::Run() {
  NameThread("sagad-reader");
  // Per thread on Linux (a thread is a task): lowers this one only.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kReaderNice);
  while (true) {
    std::function<void()> read;
    {
      MutexLock l(mu_);
      cv_.Wait(mu_, [&]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every queued read ran
      read = std::move(queue_.front());
      queue_.pop_front();
    }
    read();
  }
}

}  // namespace sagad
