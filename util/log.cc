#include "util/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>

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

void EngineLog(nlohmann::json line) {
  if (Sink()) return Sink()(line);
  static Mutex mu;
  auto now = std::chrono::system_clock::now();
  time_t t = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm;
  gmtime_r(&t, &tm);
  char ts[64];
  snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  line["ts"] = ts;
  line["level"] = "info";
  std::string text = DumpJson(line);
  text += '\n';
  MutexLock l(mu);
  std::cerr.write(text.data(), static_cast<std::streamsize>(text.size()));
}

}  // namespace sagad
