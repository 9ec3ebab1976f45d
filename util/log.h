// EngineLog: one structured JSON line per significant event on stderr
// ({"ts","level","msg",...}), written with one write so that lines from
// several threads never interleave. Never tokens or request bodies.
// Thread-safety: may be called from any thread.
#pragma once

#include <nlohmann/json.hpp>

namespace sagad {

void EngineLog(nlohmann::json line);

}  // namespace sagad
