// McpSession: one MCP server as sagad's adapter reaches it, over stdio (a
// child process sagad supervises: mcp_stdio.cc) or Streamable HTTP
// (mcp_http.cc). A session sends JSON-RPC requests and hands back what came
// of each, classified by whether the request can have been acted on: the
// rule every outcome of a tool call rests on (docs/agents.md, "MCP servers
// as downstreams").
//
// Contract:
// - Request starts one request; `done` runs exactly once, on the session's
//   own thread (stdio) or its HTTP client's loop (HTTP), unless the session
//   is destroyed first (then never: the engine ends its calls before its
//   adapter goes).
// - A request waits, unsent, while the server is starting (the child
//   spawned and initialised, or the HTTP session opened); `timeout_ms` runs
//   from when Request is called. Past it, a request never written ends with
//   sent false; one written ends with sent true and no reply.
// - A reply is the JSON-RPC response with the request's id: `result` or
//   `error` (its code and message).
// Thread-safety: Request from any thread.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "adapters/adapter.h"

namespace sagad {

class AsyncHttpClient;

struct McpReply {
  bool sent = false;     // the request can have been acted on
  bool replied = false;  // a response came: result or error
  nlohmann::json result;
  int error_code = 0;  // with error: the JSON-RPC error's code
  std::string error;   // the error's message, or what went wrong in words
};

// How to reach one MCP server (config "mcp_servers"): `command` (stdio: the
// program and its arguments, run with `env` added to sagad's environment)
// or the service's base_url (Streamable HTTP).
struct McpServerConfig {
  ServiceConfig service;  // name, base_url (HTTP), timeout_ms, headers, limits
  std::vector<std::string> command;
  std::vector<std::pair<std::string, std::string>> env;
};

class McpSession {
 public:
  using Done = std::function<void(McpReply)>;
  virtual ~McpSession() = default;
  virtual void Request(const std::string& method, nlohmann::json params, Done done) = 0;
};

// The protocol version sagad asks for and the initialize request's params.
extern const char kMcpClientVersion[];
nlohmann::json McpInitializeParams();

// A stdio server: the child is spawned at once and restarted with backoff
// (100 ms doubling to 5 s) whenever it exits; destroying the session ends
// it (stdin closed, SIGTERM, SIGKILL after 2 s). The child also gets
// SIGTERM if sagad dies.
std::unique_ptr<McpSession> NewStdioMcpSession(const McpServerConfig& config);
// A Streamable HTTP server at the service's base_url; the session (its
// Mcp-Session-Id) is opened on first use and again after the server drops it.
// Its exchanges run on `client` (the service added to it first), which must
// outlive the session.
std::unique_ptr<McpSession> NewHttpMcpSession(const McpServerConfig& config,
                                              AsyncHttpClient& client);

}  // namespace sagad
