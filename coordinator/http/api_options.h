// What the HTTP API is configured with: bearer tokens and their roles, TLS,
// and the front end's caps and deadlines. The server folder fills it from
// the config file (coordinator/server/config.h); an embedder may fill it
// itself. Values; thread-safe to copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sagad {

enum class Role { kViewer = 0, kSubmitter = 1, kOperator = 2, kAdmin = 3 };
// "viewer" | "submitter" | "operator" | "admin"; false for anything else.
bool ParseRole(const std::string& s, Role* out);
const char* RoleName(Role role);

struct Token {
  std::string name;
  std::string token;         // the secret itself, or empty when...
  std::string token_sha256;  // ...only its SHA-256 (lowercase hex) is configured
  Role role = Role::kViewer;
};

struct ApiOptions {
  std::vector<Token> tokens;                // none: every caller has every role (loopback only)
  std::string tls_cert_file, tls_key_file;  // both set: HTTPS only
  // Open connections in all and per client address (beyond: 503 and close),
  // the time a request's head and body have to arrive, and a kept-alive
  // connection's idle time. Handlers run on the engine's housekeeping
  // threads (Engine::PostHouse; EngineOptions::house_threads).
  size_t max_connections = 10000;
  size_t max_connections_per_client = 2000;
  int64_t request_timeout_ms = 10000;
  int64_t idle_timeout_ms = 30000;
  // Threads that read the history (lists, searches) apart from the handlers
  // (history_readers.h); 0: on the handler thread (the simulator).
  int history_readers = 1;
  // The store watchdog: /readyz answers 503 (and sagad_store_stalled is 1)
  // while writes have been queued this long with none finished.
  int64_t watchdog_ms = 10000;
  // Tenancy (api_tenancy.h): Host names served without tokens besides the
  // loopback ones; Origins a browser may call from (/mcp in every mode);
  // the secret a Prometheus scrape sends for /metrics (with tokens; any
  // token also does); the runs one principal may have unfinished at once.
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> allowed_origins;
  std::string metrics_token;
  size_t max_open_runs = 1000;
};

}  // namespace sagad
