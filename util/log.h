// EngineLog: one structured JSON line per significant event on stderr
// ({"ts","level","msg",...}), written with one write so that lines from
// several threads never interleave. Never tokens or request bodies.
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
