#include "tests/testing/cluster.h"

#include <httplib.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include "tests/testing/netns.h"
#include "tests/testing/postgres.h"

namespace sagad::testing {

Reply Http(int port, const std::string& method, const std::string& path, const std::string& body,
           const std::map<std::string, std::string>& headers) {
  return HttpAt("127.0.0.1", port, method, path, body, headers);
}

Reply HttpAt(const std::string& host, int port, const std::string& method, const std::string& path,
             const std::string& body, const std::map<std::string, std::string>& headers) {
  httplib::Client cli(host, port);
  cli.set_read_timeout(60, 0);
  httplib::Request req;
  req.method = method;
  req.path = path;
  for (const auto& [k, v] : headers) req.headers.emplace(k, v);
  if (!body.empty()) {
    req.body = body;
    if (!req.has_header("Content-Type")) req.headers.emplace("Content-Type", "application/json");
  }
  Reply out;
  auto res = cli.send(req);
  if (!res) return out;
  out.status = res->status;
  out.raw = res->body;
  for (const auto& [k, v] : res->headers) out.headers[k] = v;
  out.body = nlohmann::json::parse(res->body, nullptr, false);
  return out;
}

Downstream::Downstream(bool dedup, const NetNs* ns) {
  std::vector<std::string> argv;
  if (ns) {
    host_ = ns->inner();
    argv = {"/usr/sbin/ip", "netns", "exec", ns->name()};  // execv: a path
  }
  for (std::string a : {std::string(EXAMPLE_SERVICES_BIN), std::string("--listen"), host_ + ":0"})
    argv.push_back(a);
  if (!dedup) argv.push_back("--no-dedup");
  proc_ = std::make_unique<Subprocess>(argv);
  port_ = proc_->WaitForPort();
  if (port_ < 0) throw std::runtime_error("example-services did not start");
}

nlohmann::json Downstream::Effects() { return HttpAt(host_, port_, "GET", "/_effects").body; }

int Downstream::RouteCount(const std::string& route) {
  auto e = Effects();
  return e["by_route"].value(route, 0);
}

void Downstream::Fault(const nlohmann::json& fault) {
  Reply r = HttpAt(host_, port_, "POST", "/_faults", fault.dump());
  if (r.status != 200) throw std::runtime_error("cannot set fault");
}

Coordinator::Coordinator(const Downstream& downstream, const std::string& data_dir,
                         nlohmann::json service_overrides, nlohmann::json tokens)
    : data_dir_(data_dir) {
  nlohmann::json services = nlohmann::json::object();
  for (const char* name : {"ticketing", "edr", "iam", "mail", "inventory", "payments", "shipping",
                           "airline", "hotel", "cars"}) {
    nlohmann::json s = {{"base_url", downstream.url()}, {"timeout_ms", 1000}};
    if (service_overrides.contains(name)) s.update(service_overrides[name]);
    services[name] = s;
  }
  // A stable coordinator id: a restarted sagad takes its leases back at once.
  nlohmann::json config = {
      {"listen", "127.0.0.1:0"}, {"data_dir", data_dir}, {"services", services},
      {"tokens", tokens},        {"workers", 8},         {"coordinator_id", "test-sagad"},
      {"examples", true}};
  // SAGAD_TEST_STORE=postgres runs the same test on PostgreSQL: each data
  // dir becomes a database of its own (coordinators sharing a dir share it).
  const char* store = std::getenv("SAGAD_TEST_STORE");
  if (store && std::string(store) == "postgres") {
    static std::map<std::string, std::string> databases;
    static std::mutex mu;
    std::lock_guard<std::mutex> l(mu);
    auto it = databases.find(data_dir);
    if (it == databases.end())
      it = databases.emplace(data_dir, PostgresServer::Shared().NewDatabase()).first;
    config["store"] = it->second;
  }
  static int configs = 0;  // several coordinators may share a data dir
  config_path_ = data_dir + "." + std::to_string(++configs) + ".config.json";
  config_ = config;
  std::ofstream(config_path_) << config.dump(2);
}

void Coordinator::Configure(const nlohmann::json& extra) {
  config_.update(extra);
  std::ofstream(config_path_) << config_.dump(2);
}

int Coordinator::Start(const std::string& crash_at, const std::string& pause_at) {
  std::map<std::string, std::string> env;
  if (!crash_at.empty()) env["SAGA_CRASH_AT"] = crash_at;
  if (!pause_at.empty()) env["SAGA_PAUSE_AT"] = pause_at;
  std::vector<std::string> argv = {SAGAD_BIN, "--config", config_path_};
  argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  proc_ = std::make_unique<Subprocess>(argv, env, log_path_);
  port_ = proc_->WaitForPort();
  return port_;
}

void Coordinator::Kill() {
  proc_->Kill(SIGKILL);
  proc_->Wait();
}

int Coordinator::Terminate() {
  proc_->Kill(SIGTERM);
  return proc_->Wait();
}

Reply Coordinator::Submit(const std::string& saga, const nlohmann::json& input, double wait,
                          const std::string& key) {
  std::string path = "/v1/sagas/" + saga + "/instances";
  if (wait > 0) path += "?wait=" + std::to_string(wait);
  std::map<std::string, std::string> h = Auth();
  if (!key.empty()) h["Idempotency-Key"] = key;
  return Http(port_, "POST", path, nlohmann::json{{"input", input}}.dump(), h);
}

std::map<std::string, std::string> Coordinator::Auth() const {
  if (token_.empty()) return {};
  return {{"Authorization", "Bearer " + token_}};
}

Reply Coordinator::Get(const std::string& path) { return Http(port_, "GET", path, "", Auth()); }

Reply Coordinator::Post(const std::string& path, const nlohmann::json& body) {
  return Http(port_, "POST", path, body.dump(), Auth());
}

nlohmann::json Coordinator::WaitStatus(const std::string& id, const std::string& status,
                                       std::chrono::milliseconds timeout) {
  nlohmann::json last;
  WaitFor(
      [&] {
        Reply r = Get("/v1/instances/" + id + "?wait=1");
        if (r.status == 200) last = r.body;
        return r.status == 200 && r.body.value("status", "") == status;
      },
      timeout);
  return last;
}

nlohmann::json NonDeduplicating(const std::vector<std::string>& services) {
  nlohmann::json o = nlohmann::json::object();
  for (const auto& s : services) o[s] = {{"idempotent", false}, {"queryable", true}};
  return o;
}

std::string RepeatedEffects(Downstream& downstream) {
  std::string out;
  if (!WaitFor([&] { return downstream.Effects()["pending"] == 0; }))
    out += "requests still pending; ";
  nlohmann::json e = downstream.Effects();
  for (const auto& [key, n] : e["by_key"].items())
    if (n.get<int>() != 1) out += key + " x" + std::to_string(n.get<int>()) + "; ";
  return out;
}

nlohmann::json Events(Coordinator& c, const std::string& id) {
  return c.Get("/v1/instances/" + id + "/events").body["events"];
}

nlohmann::json IncidentInput() {
  return {{"title", "phishing"},
          {"severity", "high"},
          {"host", "laptop-7"},
          {"user", "bob"},
          {"email", "bob@example.com"}};
}

nlohmann::json OrderInput() {
  return {{"sku", "SKU-1"},    {"qty", 2},          {"amount", 4200},
          {"currency", "EUR"}, {"customer", "c-9"}, {"address", "1 Main St"}};
}

nlohmann::json TripInput() {
  return {{"flight", "LH100"},
          {"hotel", "Ritz"},
          {"nights", 2},
          {"pickup", "MUC"},
          {"days", 3},
          {"traveller", "ann"},
          {"email", "ann@example.com"},
          {"amount", 900},
          {"currency", "EUR"}};
}

}  // namespace sagad::testing
