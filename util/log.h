// EngineLog: one structured JSON line per significant event on stderr
// ({"ts","level","msg",...}), written with one write so that lines from
// several threads never interleave. Never tokens or request bodies.
// Lines that repeat one error (the same "msg" and "error": a full disk seen
// by every instance at once) are written at most 10 times a second; the
// next one written says how many were left out ("suppressed": n).
// Thread-safety: may be called from any thread.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

namespace sagad {

void EngineLog(nlohmann::json line);

// Sends every later line to `sink` instead of stderr, without "ts" or
// "level" (the simulator keeps them in its trace, or drops them); an empty
// sink restores stderr. Call it while no other thread logs.
void SetLogSink(std::function<void(nlohmann::json&)> sink);

}  // namespace sagad
