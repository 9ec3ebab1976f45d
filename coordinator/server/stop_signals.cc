#include "coordinator/server/stop_signals.h"

#include <errno.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <iostream>

#include "util/json_limits.h"

namespace sagad {
namespace {

sigset_t Signals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  return sigs;
}

}  // namespace

void StopSignals::Block() {
  sigset_t sigs = Signals();
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

StopSignals::StopSignals() {
  sigset_t sigs = Signals();
  fd_ = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) error_ = std::string("cannot watch for stop signals: ") + strerror(errno);
}

StopSignals::~StopSignals() {
  if (fd_ >= 0) ::close(fd_);
}

int StopSignals::Read() {
  int stop = 0;
  signalfd_siginfo info;
  while (fd_ >= 0 && ::read(fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig != SIGHUP) {
      if (stop == 0) stop = sig;
      continue;
    }
    std::cerr << DumpJson({{"msg",
                            "SIGHUP ignored: sagad does not reload its config; restart "
                            "it (SIGTERM drains) to apply a change"},
                           {"signal", sig}})
              << std::endl;
  }
  return stop;
}

}  // namespace sagad
