#include "coordinator/crash_point.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace sagad {
namespace {
bool g_enabled = false;
std::string g_point;
std::atomic<int> g_remaining{1};
}  // namespace

void InitCrashPointsFromEnv() {
  const char* v = std::getenv("SAGA_CRASH_AT");
  if (v == nullptr || *v == '\0') return;
  std::string s(v);
  size_t colon = s.find(':');
  g_point = s.substr(0, colon);
  if (colon != std::string::npos) g_remaining = std::max(1, std::atoi(s.c_str() + colon + 1));
  g_enabled = true;
}

void CrashPoint(const char* name) {
  if (!g_enabled) return;
  if (g_point != name) return;
  if (g_remaining.fetch_sub(1) == 1) _exit(75);
}

}  // namespace sagad
