// Real processes for integration tests: example-services (the downstream)
// and sagad on a temporary data dir, both on 127.0.0.1 with OS-chosen ports.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/subprocess.h"

namespace sagad::testing {

struct Reply {
  int status = 0;  // 0: no response
  nlohmann::json body;
  std::string raw;
  std::map<std::string, std::string> headers;
  std::string header(const std::string& k) const {
    auto it = headers.find(k);
    return it == headers.end() ? "" : it->second;
  }
};

// One HTTP request on loopback (fresh connection).
Reply Http(int port, const std::string& method, const std::string& path,
           const std::string& body = "", const std::map<std::string, std::string>& headers = {});
// The same to `host`.
Reply HttpAt(const std::string& host, int port, const std::string& method, const std::string& path,
             const std::string& body = "", const std::map<std::string, std::string>& headers = {});

class NetNs;

class Downstream {
 public:
  // With `ns`, it runs in that network namespace, on its address (url()).
  explicit Downstream(bool dedup = true, const NetNs* ns = nullptr);
  int port() const { return port_; }
  pid_t pid() const { return proc_->pid(); }
  std::string url() const { return "http://" + host_ + ":" + std::to_string(port_); }
  nlohmann::json Effects();
  // Effects counted for a route (create_ticket, close_ticket, ...).
  int RouteCount(const std::string& route);
  void Fault(const nlohmann::json& fault);

 private:
  std::unique_ptr<Subprocess> proc_;
  std::string host_ = "127.0.0.1";
  int port_ = -1;
};

class Coordinator {
 public:
  // `services` overrides per service (queryable, idempotent, timeout_ms).
  Coordinator(const Downstream& downstream, const std::string& data_dir,
              nlohmann::json service_overrides = nlohmann::json::object(),
              nlohmann::json tokens = nlohmann::json::array());
  // Starts sagad (SAGA_CRASH_AT from `crash_at` if set). Returns the port, -1
  // if it did not come up.
  int Start(const std::string& crash_at = "", const std::string& pause_at = "");
  int port() const { return port_; }
  // Merges `extra` into the config file (for the next Start).
  void Configure(const nlohmann::json& extra);
  // Extra sagad arguments for the next Start (e.g. --definitions DIR).
  void AddArgs(std::vector<std::string> args) { extra_args_ = std::move(args); }
  // sagad's stderr (its log) is appended to `path` from the next Start.
  void LogTo(const std::string& path) { log_path_ = path; }
  Subprocess& process() { return *proc_; }
  void Kill();      // SIGKILL and reap
  int Terminate();  // SIGTERM, returns exit code

  // The bearer token Submit, Get, Post and WaitStatus send (none: empty).
  void UseToken(std::string token) { token_ = std::move(token); }
  Reply Submit(const std::string& saga, const nlohmann::json& input, double wait = 0,
               const std::string& idempotency_key = "");
  Reply Get(const std::string& path);
  Reply Post(const std::string& path, const nlohmann::json& body = nlohmann::json::object());
  // Polls until the instance has `status`; returns the last view.
  nlohmann::json WaitStatus(const std::string& id, const std::string& status,
                            std::chrono::milliseconds timeout = std::chrono::seconds(20));

 private:
  std::map<std::string, std::string> Auth() const;
  std::string token_;
  std::string config_path_;
  nlohmann::json config_;
  std::string data_dir_;
  std::vector<std::string> extra_args_;
  std::string log_path_;
  std::unique_ptr<Subprocess> proc_;
  int port_ = -1;
};

// Service overrides declaring `services` not deduplicating but queryable:
// re-sending to them is only safe after asking.
nlohmann::json NonDeduplicating(const std::vector<std::string>& services);

// Waits until no request is inside the downstream, then lists every key that
// took effect more than once ("" when each logical operation happened once).
std::string RepeatedEffects(Downstream& downstream);

// The instance's event log (an array).
nlohmann::json Events(Coordinator& c, const std::string& id);

nlohmann::json IncidentInput();
nlohmann::json OrderInput();
nlohmann::json TripInput();

}  // namespace sagad::testing
