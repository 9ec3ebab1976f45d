// StopSignals: the signals that stop sagad (SIGTERM, SIGINT) and the one it
// logs and ignores (SIGHUP: there is no reload), read from a signalfd, so
// that the API's event loop watches for them (ApiServer::OnReadable) and no
// thread waits for a signal. The signals must be blocked in every thread
// before any starts (Block), or the kernel delivers them the default way.
// Thread-safety: one thread reads (the loop's).
#pragma once

#include <signal.h>

#include <string>

namespace sagad {

class StopSignals {
 public:
  // Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (and so in every
  // thread it starts after) and ignores SIGPIPE. Call first thing.
  static void Block();

  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The descriptor to watch for reading; -1 when signalfd failed (then
  // sagad does not start: it could not be stopped but by SIGKILL), and
  // `error` says why.
  int fd() const { return fd_; }
  const std::string& error() const { return error_; }
  // Reads what arrived: the first stop signal among it, or 0 (none, or only
  // SIGHUP, which is logged). Never blocks.
  int Read();

 private:
  int fd_ = -1;
  std::string error_;
};

}  // namespace sagad
