// sagad-sim: the deterministic simulator (docs/simulation.md).
//   sagad-sim [--seeds N] [--seed S] [--sagas K] [--bug NAME] [--trace]
// runs seeds S .. S+N-1 (default S=1, N=1), stops at the first violation
// (prints it, the trace before it and the command that replays it; exit 1)
// and ends with "sim: N seeds, M sagas, K events, V violations, R sagas/s"
// (R per CPU-second of this process). An engine invariant that fails
// (SAGAD_CHECK), or a crash (SIGSEGV, SIGBUS), ends the process after
// "seed N: ABORT" and its replay on stdout.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <ctime>
#include <iostream>
#include <string>

#include "coordinator/sim/bugs.h"
#include "coordinator/sim/run.h"
#include "util/log.h"

namespace {

int Usage(const std::string& why) {
  std::cerr << "sagad-sim: " << why
            << "\nusage: sagad-sim [--seeds N] [--seed S] [--sagas K] [--bug NAME] [--trace]\n";
  return 2;
}

// The seed running now, for an abort: an engine invariant that fails
// (SAGAD_CHECK) ends the process, and a campaign must know which seed did.
std::atomic<uint64_t> running_seed{0};

// SIGABRT, SIGSEGV, SIGBUS: "seed N: ABORT" and its replay command on
// stdout, then the signal again. Only async-signal-safe calls.
extern "C" void OnAbort(int sig) {
  char digits[24];
  int n = 0;
  uint64_t seed = running_seed.load();
  do {
    digits[n++] = static_cast<char>('0' + seed % 10);
    seed /= 10;
  } while (seed > 0 && n < 20);
  char line[160];
  size_t len = 0;
  auto put = [&](const char* s) {
    while (*s && len < sizeof line) line[len++] = *s++;
  };
  auto number = [&] {
    for (int i = n - 1; i >= 0 && len < sizeof line; --i) line[len++] = digits[i];
  };
  put("seed ");
  number();
  put(sig == SIGABRT ? ": ABORT: an invariant check failed (the line on stderr)"
                     : ": ABORT: the simulator crashed (a memory error: run it under ASan)");
  put("\nreplay: sagad-sim --seed ");
  number();
  put(" --trace\n");
  ssize_t ignored = write(1, line, len);
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

bool Number(const std::string& s, uint64_t* out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoull(s);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seeds = 1, first = 1, sagas = 0;
  sagad::sim::RunOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--trace") {
      options.trace = true;
    } else if (a == "--seeds" || a == "--seed" || a == "--sagas") {
      uint64_t n = 0;
      if (!Number(v, &n)) return Usage(a + " needs a number");
      (a == "--seeds" ? seeds : a == "--seed" ? first : sagas) = n;
      ++i;
    } else if (a == "--bug") {
      if (v.empty()) return Usage("--bug needs a name");
      sagad::sim::Bug bug;
      if (!sagad::sim::ParseBug(v, &bug)) {
        std::string names;
        for (const auto& n : sagad::sim::BugNames()) names += " " + n;
        return Usage("unknown bug " + v + " (known:" + names + ")");
      }
      options.bug = v;
      ++i;
    } else if (a == "--help" || a == "-h") {
      Usage("the deterministic simulator");
      return 0;
    } else {
      return Usage("unknown argument " + a);
    }
  }
  options.sagas = static_cast<int>(sagas);
  sagad::SetLogSink([](nlohmann::json&) {});
  uint64_t total_sagas = 0, events = 0, done = 0, violations = 0;
  std::clock_t cpu0 = std::clock();
  std::cout.flush();
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS}) std::signal(sig, OnAbort);
  for (uint64_t seed = first; seed < first + seeds; ++seed) {
    running_seed = seed;
    sagad::sim::SeedResult r = sagad::sim::RunSeed(seed, options);
    total_sagas += static_cast<uint64_t>(r.sagas);
    events += r.events;
    ++done;
    if (!r.ok || options.trace) {  // without --trace, the last 200 lines
      size_t from = options.trace || r.trace.size() < 200 ? 0 : r.trace.size() - 200;
      for (size_t k = from; k < r.trace.size(); ++k) std::cout << "  " << r.trace[k] << "\n";
    }
    if (!r.ok) {
      ++violations;
      std::cout << "seed " << seed << ": VIOLATION: " << r.violation << "\n"
                << "replay: sagad-sim --seed " << seed << " --trace"
                << (options.sagas ? " --sagas " + std::to_string(options.sagas) : "")
                << (options.bug.empty() ? "" : " --bug " + options.bug) << "\n";
      break;
    }
  }
  double cpu = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  std::cout << "sim: " << done << " seeds, " << total_sagas << " sagas, " << events << " events, "
            << violations << " violations, "
            << static_cast<uint64_t>(cpu > 0 ? static_cast<double>(total_sagas) / cpu : 0)
            << " sagas/s\n";
  return violations == 0 ? 0 : 1;
}
