// The parts of the config that say how to reach downstreams: "services"
// (HTTP services of the downstream protocol) and "mcp_servers" (MCP servers
// a tool may call). Used by config.cc only.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "adapters/adapter.h"
#include "adapters/mcp_session.h"
#include "util/status.h"

namespace sagad {

// Durations in milliseconds: up to about 24 days (what a timer takes).
constexpr int64_t kMaxConfigMs = 2147483647;

// A file sagad must read at start: refused, naming `key`, if it cannot.
Status ReadableFile(const std::string& path, const std::string& key);
// "services": {"NAME": "URL" | {...}}; `section` starts the messages.
Status ParseService(const std::string& name, const nlohmann::json& s, ServiceConfig* sc,
                    const std::string& section = "services");
// "mcp_servers": {"NAME": {"url": URL} | {"command": [...], "env": {...}}}.
Status ParseMcpServer(const std::string& name, const nlohmann::json& s, McpServerConfig* mc);

}  // namespace sagad
