// The JSON-RPC and MCP pieces both eras of POST /mcp share
// (coordinator/http/api_mcp.cc: the 2025 era, sessions; api_mcp_modern.cc:
// the 2026-07-28 revision, stateless): messages, a toolbox's tools as MCP
// tools, a call's outcome as a tools/call result.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "coordinator/http/http_api_impl.h"
#include "sagas/toolbox.h"

namespace sagad {

// The 2025-era revisions sagad speaks, newest first.
const std::vector<std::string>& McpLegacyVersions();
// The modern revisions (per-request _meta, no sessions).
inline constexpr char kMcpModernVersion[] = "2026-07-28";
// Every revision, the modern first (server/discover, version errors).
std::vector<std::string> McpAllVersions();
bool McpSpeaksLegacy(const std::string& version);

nlohmann::json RpcResult(const nlohmann::json& id, nlohmann::json result);
nlohmann::json RpcError(const nlohmann::json& id, int code, const std::string& message,
                        nlohmann::json data = nullptr);
void Rpc(HttpResponse& res, int status, const nlohmann::json& message);

// A toolbox's tools; with `run_handle`, each also takes the run's handle
// (`run`: the stateless era).
nlohmann::json McpToolsOf(const ToolboxDefinition& tb, bool run_handle);
// The tools every era adds to a toolbox's: finish_run and abort_run (and,
// with `run_handle`, open_run first, and `run` on both).
nlohmann::json McpRunTools(const ToolboxDefinition& tb, bool run_handle);
nlohmann::json McpText(const std::string& text);
// The tools/call result for a call's view (or why it was refused).
nlohmann::json McpCallResult(const CallAnswer& a);
// A tool's error result (the call was not made).
nlohmann::json McpToolError(const std::string& text);
// `result` as the revision wants it: the 2026-07-28 revision adds
// resultType and the server's identity in _meta.
nlohmann::json McpOutcome(nlohmann::json result, bool modern);
// Answers request `id` with `result` (200), as the revision wants it.
void McpAnswer(HttpResponse& res, const nlohmann::json& id, nlohmann::json result, bool modern);
// Whether a call in `status` answers a task to a client of the Tasks
// extension: it waits for an operator, or is under way or in doubt.
bool McpTaskStatus(const std::string& status);
// The task of a call's view (taskId `task_id`: "<run>:<call_id>"): working
// until the call is decided, then completed with the result tools/call
// would have answered, or cancelled when its run ended before it was sent.
nlohmann::json McpTaskOf(const nlohmann::json& call, const std::string& task_id);
// The CreateTaskResult for a call's view (with its instance_id).
nlohmann::json McpCreateTask(const nlohmann::json& call);
// Whether a request speaks the 2026-07-28 revision (or later): its
// MCP-Protocol-Version header or its _meta says so, or it is
// server/discover.
bool IsModernMcp(const std::string& header_version, const nlohmann::json& message);

}  // namespace sagad
