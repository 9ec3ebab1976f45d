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

constexpr const char* kNames[] = {
    "after_create",
    "before_started",
    "after_started",
    "before_outcome",
    "after_outcome",
    "before_compensation_started",
    "after_compensation_started",
    "before_compensation_outcome",
    "after_compensation_outcome",
};
constexpr int kPoints = static_cast<int>(sizeof(kNames) / sizeof(kNames[0]));
static_assert(kPoints == static_cast<int>(CrashAt::kAfterCompensationOutcome) + 1,
              "a name for every crash point");

struct Trigger {
  bool enabled = false;
  CrashAt point = CrashAt::kAfterCreate;
  std::atomic<int> remaining{1};

  Status Init(const char* env) {
    const char* v = std::getenv(env);
    if (v == nullptr || *v == '\0') return Status::Ok();
    std::string s(v);
    size_t colon = s.find(':');
    const std::string name = s.substr(0, colon);
    int i = 0;
    while (i < kPoints && name != kNames[i]) ++i;
    if (i == kPoints) {
      std::string known;
      for (const char* n : kNames) known += std::string(known.empty() ? "" : ", ") + n;
      return InvalidArgument(std::string(env) + " names no crash point '" + name +
                             "' (known: " + known + ")");
    }
    point = static_cast<CrashAt>(i);
    if (colon != std::string::npos) remaining = std::max(1, std::atoi(s.c_str() + colon + 1));
    enabled = true;
    return Status::Ok();
  }
  bool Fires(CrashAt p) { return enabled && point == p && remaining.fetch_sub(1) == 1; }
};

Trigger g_crash, g_pause;
bool g_any = false;

}  // namespace

Status InitCrashPointsFromEnv() {
  SAGAD_RETURN_IF_ERROR(g_crash.Init("SAGA_CRASH_AT"));
  SAGAD_RETURN_IF_ERROR(g_pause.Init("SAGA_PAUSE_AT"));
  g_any = g_crash.enabled || g_pause.enabled;
  return Status::Ok();
}

void CrashPoint(CrashAt point) {
  if (!g_any) return;
  if (g_crash.Fires(point)) _exit(75);
  if (g_pause.Fires(point)) raise(SIGSTOP);
}

}  // namespace sagad
