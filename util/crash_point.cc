#include "util/crash_point.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace sagad {
namespace {

struct Trigger {
  bool enabled = false;
  std::string point;
  std::atomic<int> remaining{1};

  void Init(const char* env) {
    const char* v = std::getenv(env);
    if (v == nullptr || *v == '\0') return;
    std::string s(v);
    size_t colon = s.find(':');
    point = s.substr(0, colon);
    if (colon != std::string::npos) remaining = std::max(1, std::atoi(s.c_str() + colon + 1));
    enabled = true;
  }
  bool Fires(const char* name) { return enabled && point == name && remaining.fetch_sub(1) == 1; }
};

Trigger g_crash, g_pause;
bool g_any = false;

}  // namespace

void InitCrashPointsFromEnv() {
  g_crash.Init("SAGA_CRASH_AT");
  g_pause.Init("SAGA_PAUSE_AT");
  g_any = g_crash.enabled || g_pause.enabled;
}

void CrashPoint(const char* name) {
  if (!g_any) return;
  if (g_crash.Fires(name)) _exit(75);
  if (g_pause.Fires(name)) raise(SIGSTOP);
}

}  // namespace sagad
