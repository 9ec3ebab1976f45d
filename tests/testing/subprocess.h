// Subprocess: a real child process for integration and crash tests. Reads
// the "LISTENING <port>" line the sagad and example-services binaries print,
// with a deadline (never a sleep).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace sagad::testing {

class Subprocess {
 public:
  // Starts `argv` with extra environment variables. Aborts the test binary if
  // fork/exec fails.
  // stderr goes to `stderr_path` (appended) if set, else to /dev/null unless
  // SAGAD_TEST_VERBOSE is set.
  Subprocess(const std::vector<std::string>& argv,
             const std::map<std::string, std::string>& env = {},
             const std::string& stderr_path = "");
  ~Subprocess();  // SIGKILLs the child if it still runs
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Waits for "LISTENING <port>" on stdout; -1 if the child exits or the
  // deadline passes first.
  int WaitForPort(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void Kill(int sig);
  // Everything the child writes on stdout until it closes it (or timeout).
  std::string ReadOutput(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Waits for exit; returns the exit code, 128+signal if killed, or -1 on
  // timeout.
  int Wait(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  bool Running();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int status_ = -1;
  bool reaped_ = false;
  std::string buffer_;
};

// A fresh temporary directory, removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A loopback TCP port that was free a moment ago (nothing listens on it).
int FreePort();
// A socket listening on a free loopback port; *port says which. Throws if
// it cannot listen.
int ListenOnLoopback(int* port);

// Polls `cond` until true or timeout; returns its last value.
template <typename F>
bool WaitFor(F cond, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (cond()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace sagad::testing
