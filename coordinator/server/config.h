// sagad configuration: the JSON config file plus command-line overrides.
//   {"listen": "127.0.0.1:8080", "data_dir": "./data",
//    "services": {"ticketing": {"base_url": "http://...", "timeout_ms": 5000,
//                 "headers": {...}, "queryable": true, "idempotent": true,
//                 "operations_path": "/operations/{key}"}},
//    "tokens": [{"name": "alice", "token": "...", "role": "operator"}],
//    "webhooks": [{"url": "http://...", "secret": "...", "timeout_ms": 5000}],
//    "workers": 2,   (default: the machine's cores, at least 2)
//    "api": {"max_connections": 10000, "max_connections_per_client": 2000,
//            "request_timeout_ms": 10000, "idle_timeout_ms": 30000,
//            "threads": cores / 2, at least 2, "history_readers": cores / 4, at least 1}}
#pragma once

#include <map>
#include <string>
#include <vector>

#include "adapters/adapter.h"
#include "adapters/mcp_session.h"
#include "coordinator/http/api_options.h"
#include "util/status.h"

namespace sagad {

struct WebhookConfig {
  std::string url;     // http://host:port/path
  std::string secret;  // empty: unsigned
  int timeout_ms = 5000;
};

// The threads a default sagad runs on C cores, at most 2 x C + 4 (8 on 2
// cores), each a role no other thread has:
// - the main thread: the API's event loop, the stop signals, the store's
//   watchdog (coordinator/server/server.cc);
// - `workers` owner shards: the machine's cores, at least 2 (DefaultWorkers).
//   No task waits, so more only adds thread switches;
// - `api.threads` housekeeping threads, which may wait for the store:
//   heartbeats, retention, waiters' looks at the store and the API's
//   handlers (none of which waits for a commit, a call or a long poll):
//   C / 2, at least 2 (DefaultApiThreads);
// - the event loops of downstream calls: workers / 4, at least 1
//   (CallLoopsFor); a loop only moves bytes and hands each reply to its
//   owner;
// - the store's committer;
// - `api.history_readers` for lists and searches: C / 4, at least 1.
// Each default is a function of the cores (of this machine unless said).
int MachineCores();
int DefaultWorkers(int cores = MachineCores());
int DefaultApiThreads(int cores = MachineCores());
int DefaultHistoryReaders(int cores = MachineCores());
int CallLoopsFor(int workers);

struct Config {
  std::string listen_host = "127.0.0.1";
  int listen_port = 8080;
  std::string data_dir = "./sagad-data";
  // A libpq URI (postgresql://...) selects the PostgreSQL store; empty:
  // LMDB in data_dir.
  std::string store;
  int64_t lmdb_map_size_mb = 65536;
  // "tls": {"cert_file", "key_file"}: the API (and console) over HTTPS only.
  std::string tls_cert_file, tls_key_file;
  // "retention": {"finished_after_ms": N}: finished instances deleted N ms
  // after they finished; 0 keeps them forever.
  int64_t retention_ms = 0;  // the LMDB map (a sparse file grows as written)
  std::map<std::string, ServiceConfig> services;
  // "mcp_servers": {"NAME": {"url": URL} | {"command": [...], "env": {...}}}:
  // MCP servers a tool's forward or compensation may call (docs/agents.md).
  std::map<std::string, McpServerConfig> mcp_servers;
  std::vector<Token> tokens;
  std::vector<WebhookConfig> webhooks;
  int workers = DefaultWorkers();
  std::string definitions_dir;  // JSON sagas to register besides the built-in ones
  bool examples = false;        // register the built-in example sagas (--examples)
  bool help = false;            // --help: print the usage, run nothing
  // Unique per live process on a data dir; a restart under the same id takes
  // its leases back at once. Empty: "sagad@HOST:PORT" (random if PORT is 0).
  std::string coordinator_id;
  int64_t lease_ms = 10000;
  // The store watchdog: writes queued this long with none finished make
  // /readyz answer 503 naming the stall, and one log line say so.
  int64_t watchdog_ms = 10000;
  // "api": the HTTP front end (coordinator/http/http_server.h): open
  // connections in all and per client address (beyond: 503 and close), the
  // time a request's head and body have to arrive, a kept-alive
  // connection's idle time, and the housekeeping threads (which run the
  // handlers: EngineOptions::house_threads).
  size_t max_connections = 10000;
  size_t max_connections_per_client = 2000;
  int64_t request_timeout_ms = 10000;
  int64_t idle_timeout_ms = 30000;
  int api_threads = DefaultApiThreads();
  // The threads that read the history (lists, searches), at nice 10.
  int history_readers = DefaultHistoryReaders();
  // Tenancy (docs/configuration.md): Host names served without tokens
  // besides loopback ones, Origins a browser may call from, the secret a
  // Prometheus scrape sends for /metrics, the runs one principal may have
  // unfinished (0: no bound).
  std::vector<std::string> allowed_hosts, allowed_origins;
  std::string metrics_token;
  size_t max_open_runs = 1000;
  // "log_level" (and --log-level): debug, info (the default), warn or error.
  std::string log_level = "info";
};

// The API's part of `config`.
ApiOptions ApiOptionsOf(const Config& config);

// Parses a config document; InvalidArgument with a one-line reason.
StatusOr<Config> ParseConfig(const nlohmann::json& j);
// Reads and parses FILE.
StatusOr<Config> LoadConfigFile(const std::string& path);
// "HOST:PORT" -> host, port.
Status ParseListen(const std::string& s, std::string* host, int* port);
// "NAME=URL" -> sets or overrides that service's base_url.
Status ApplyServiceOverride(const std::string& arg, Config* config);
// Whether `host` (an address, or a name: every address it resolves to) is a
// loopback one. A name that does not resolve is not.
bool IsLoopback(const std::string& host);
// A service or webhook URL: http(s)://, a host, and no user:password@
// (credentials belong in a service's "headers", never shown). InvalidArgument
// naming `where`, without the URL.
Status CheckUrl(const std::string& where, const std::string& url);

}  // namespace sagad
