// EngineLog: one structured JSON line per significant event on stderr
// ({"ts","level","msg",...}), written with one write so that lines from
// several threads never interleave. Never tokens or request bodies.
// Lines that repeat one error (the same "msg" and "error": a full disk seen
// by every instance at once) are written at most 10 times a second; the
// next one written says how many were left out ("suppressed": n).
// Each line has a level (debug < info < warn < error); lines below the
// level set (log_level in the config, --log-level; info by default) are not
// written: what goes well, every step of every saga, is debug; what a
// human may have to act on, or a state change they would look for, is info
// or above.
// Thread-safety: may be called from any thread.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace sagad {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void EngineLog(LogLevel level, nlohmann::json line);
// An info line.
inline void EngineLog(nlohmann::json line) { EngineLog(LogLevel::kInfo, std::move(line)); }

// The lowest level written from now on (info until set).
void SetLogLevel(LogLevel level);
// Whether a line of `level` would be written (to skip building it).
bool LogEnabled(LogLevel level);
// "debug", "info", "warn" or "error" as a level: false for anything else.
bool ParseLogLevel(const std::string& name, LogLevel* level);
const char* LogLevelName(LogLevel level);

// Sends every later line to `sink` instead of stderr, without "ts" or
// "level" (the simulator keeps them in its trace, or drops them); an empty
// sink restores stderr. Call it while no other thread logs.
void SetLogSink(std::function<void(nlohmann::json&)> sink);

}  // namespace sagad
