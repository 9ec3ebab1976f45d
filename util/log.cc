#include "util/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>
#include <unordered_map>

#include "util/json_limits.h"
#include "util/mutex.h"

namespace sagad {

namespace {
std::function<void(nlohmann::json&)>& Sink() {
  static auto* sink = new std::function<void(nlohmann::json&)>();
  return *sink;
}
}  // namespace

void SetLogSink(std::function<void(nlohmann::json&)> sink) { Sink() = std::move(sink); }

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
constexpr const char* kLevelNames[] = {"debug", "info", "warn", "error"};
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

bool ParseLogLevel(const std::string& name, LogLevel* level) {
  for (int i = 0; i < 4; ++i)
    if (name == kLevelNames[i]) {
      *level = static_cast<LogLevel>(i);
      return true;
    }
  return false;
}

const char* LogLevelName(LogLevel level) { return kLevelNames[static_cast<int>(level)]; }

namespace {

// Repeats of one error within the current second, per msg + error text.
struct Repeats {
  int64_t second = 0;
  int written = 0;
  int64_t suppressed = 0;
};
constexpr int kRepeatsPerSecond = 10;

// False if the line is a repeat over the limit (counted); else true, with
// "suppressed" added when repeats were left out before it.
bool LetThrough(nlohmann::json& line, int64_t second) {
  if (!line.contains("error") || !line.contains("msg")) return true;
  static Mutex mu;
  static auto* seen = new std::unordered_map<std::string, Repeats>();
  const std::string key = DumpJson(line["msg"]) + DumpJson(line["error"]);
  MutexLock l(mu);
  if (seen->size() > 10000) seen->clear();  // bounded: a flood of distinct errors
  Repeats& r = (*seen)[key];
  if (r.second != second) {
    r.second = second;
    r.written = 0;
  }
  if (r.written >= kRepeatsPerSecond) {
    ++r.suppressed;
    return false;
  }
  ++r.written;
  if (r.suppressed > 0) {
    line["suppressed"] = r.suppressed;
    r.suppressed = 0;
  }
  return true;
}

}  // namespace

void EngineLog(LogLevel level, nlohmann::json line) {
  if (Sink()) return Sink()(line);
  if (!LogEnabled(level)) return;
  static Mutex mu;
  auto now = std::chrono::system_clock::now();
  if (!LetThrough(line,
                  std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count()))
    return;
  time_t t = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm;
  gmtime_r(&t, &tm);
  char ts[64];
  snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  line["ts"] = ts;
  line["level"] = LogLevelName(level);
  std::string text = DumpJson(line);
  text += '\n';
  MutexLock l(mu);
  std::cerr.write(text.data(), static_cast<std::streamsize>(text.size()));
}

}  // namespace sagad
