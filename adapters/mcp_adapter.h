// McpAdapter: the Adapter of a sagad that calls MCP servers (config
// "mcp_servers") beside HTTP services: a call whose service is an MCP server
// (CallSpec::IsMcp) is a tools/call on it, every other call and every query
// goes to the HttpAdapter it holds.
//
// A tool call carries sagad's key in _meta ("io.sagad/idempotency-key",
// with the instance, step and attempt) for servers that read it; MCP itself
// has none, so an MCP server is configured neither idempotent nor
// queryable, and a step whose outcome is unclear is reconciled with its
// `reconcile` read or goes to review (docs/agents.md). A tool call's outcome:
//   a result: committed (its structuredContent, else the JSON of its first
//     text content, else {"content": ...}, is the step's result);
//   a result with isError, or a JSON-RPC error that says the request was
//     not taken (-32700, -32600, -32601, -32602): failed;
//   not sent (the server not started, the session not opened, 429): not
//     executed;
//   anything else (no reply in time, the server gone mid-call, another
//     error): unknown.
// Thread-safety: safe for concurrent calls.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "adapters/http_adapter.h"
#include "adapters/mcp_session.h"

namespace sagad {

class McpAdapter : public Adapter {
 public:
  McpAdapter(std::map<std::string, ServiceConfig> services,
             const std::map<std::string, McpServerConfig>& servers, int threads = 2);
  ~McpAdapter() override;

  CallResult Call(const CallRequest& req) override;
  QueryResult Query(const std::string& service, const std::string& key,
                    const std::string& instance_id, uint64_t fencing_token, int attempt,
                    const TraceContext& trace) override;
  void CallAsync(const CallRequest& req, CallDone done) override;
  void QueryAsync(const std::string& service, const std::string& key,
                  const std::string& instance_id, uint64_t fencing_token, int attempt,
                  const TraceContext& trace, QueryDone done) override;
  const ServiceConfig* Service(const std::string& name) const override;
  std::vector<std::string> ServiceNames() const override;

  // Asks `server` for its tools (tools/list, every page; waits up to its
  // timeout_ms: call it at start, never on a loop). Unavailable if the
  // server did not answer (the caller warns: it may come later).
  StatusOr<nlohmann::json> ListTools(const std::string& server);

 private:
  HttpAdapter http_;
  std::map<std::string, ServiceConfig> configs_;  // the MCP servers'
  std::unique_ptr<AsyncHttpClient> client_;       // the Streamable HTTP servers'
  std::map<std::string, std::unique_ptr<McpSession>> sessions_;
};

// A tools/call's reply as a call's outcome (the table above).
CallResult McpCallResult(const McpReply& reply);

// A call of `tool` with `arguments` (templates not rendered) against the
// server's `tools` (ListTools): InvalidArgument if it has no such tool, or
// the arguments lack a property its inputSchema requires or hold one it
// forbids (additionalProperties false).
Status CheckToolCall(const nlohmann::json& tools, const std::string& server,
                     const std::string& tool, const nlohmann::json& arguments);

}  // namespace sagad
