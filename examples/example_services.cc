// example-services: the downstream services of the example sagas in one real
// HTTP server (ticketing, edr, iam, mail, inventory, payments, shipping,
// airline, hotel, cars), for demos and tests.
//
//   example-services [--listen HOST:PORT] [--no-dedup]
// Prints "LISTENING <port>" once it serves.
//
// Protocol (what sagad expects of a downstream):
//   * Idempotency-Key: a repeated key returns the first response again with
//     Idempotent-Replayed: true and no new effect (unless --no-dedup, where
//     every POST is a new effect); same key + other body -> 422.
//   * GET /operations/{key}: 200 + the first response body if an operation
//     with that key took effect; 200 + {"outcome": "refused", "http_status",
//     "detail"} if it was received and definitely refused (a 4xx other than
//     408/409/429: the refusal is stored under its key, as Stripe does);
//     200 + {"outcome": "in_progress"} while a request with that key is still
//     being processed; 404 if none arrived.
//   * Saga-Fencing-Token lower than the highest seen for the instance -> 409.
//   * Saga-Attempt: a question GET /operations/{key} carrying Saga-Attempt: n
//     fences attempts <= n of that key: if such an attempt arrives after the
//     question (it was still queued somewhere), it is refused with 409 and
//     has no effect, so the "404, not happened" answer stays true. This is
//     what lets a non-deduplicating service be re-sent to safely.
// Test controls:
//   GET  /_effects  {"total", "by_key": {key: n}, "by_route": {route: n}, "duplicates",
//                    "pending": requests still being processed}
//   GET  /_traces   {key: [{"traceparent", "tracestate"} of each business request]}
//   GET  /_requests {"requests": [{"key", "path", "start_us", "end_us"}]}: when
//                    each business POST arrived and was answered (steady clock,
//                    microseconds), to see which requests overlapped
//   POST /_faults   {"path": "/hosts/isolate", "action": ..., "times": 1,
//                    "status": 422, "delay_ms": 0}
//     actions: reject (status, default 422, no effect), refuse (429, no effect),
//     fail_before_commit (500, no effect), commit_drop (effect, then the
//     connection breaks mid-response), commit_500 (effect, then 500),
//     delay (sleep delay_ms, then normal), query_unknown (GET /operations
//     answers 503), reject_drop (refused as reject, then the connection
//     breaks before the answer); with another action, delay_ms (if set) is
//     slept first
//   DELETE /_faults, POST /_reset
//   POST /_webhooks (a webhook sink), GET /_webhooks {"deliveries": [...]}
// --chaos P [--seed S]: besides fault orders, each business POST gets a random
// fault with probability P (commit_drop, commit_500, fail_before_commit,
// refuse, delay 400 ms; reject only for forward calls) and each GET
// /operations answers 503 with probability P/2.
// cpp-httplib holds a thread per kept-alive connection and listens with a
// queue of 5: this one process stands for every service, and sagad keeps up
// to 64 connections per service, hence 512 threads and a queue of 1024.
#define CPPHTTPLIB_LISTEN_BACKLOG 1024
#include <httplib.h>

#include <chrono>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <thread>

#include "examples/example_routes.h"

namespace {

using nlohmann::json;

struct Fault {
  std::string path;
  std::string action;
  int status = 0;
  int delay_ms = 0;
  int times = 1;
};

struct Stored {
  int status;
  std::string body;
  std::string body_hash;
};

class Services {
 public:
  Services(bool dedup, double chaos, unsigned seed) : dedup_(dedup), chaos_(chaos), rng_(seed) {}

  void Install(httplib::Server& s) {
    s.Get("/_effects", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      int dups = 0;
      for (const auto& [k, n] : by_key_) dups += n > 1 ? 1 : 0;
      res.set_content(json{{"total", total_},
                           {"by_key", by_key_},
                           {"by_route", by_route_},
                           {"duplicates", dups},
                           {"pending", pending_.size()}}
                          .dump(),
                      "application/json");
    });
    s.Post("/_faults", [this](const httplib::Request& req, httplib::Response& res) {
      json j = json::parse(req.body, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("action")) {
        res.status = 400;
        return;
      }
      Fault f;
      f.path = j.value("path", "");
      f.action = j.value("action", "");
      f.status = j.value("status", 0);
      f.delay_ms = j.value("delay_ms", 0);
      f.times = j.value("times", 1);
      std::lock_guard<std::mutex> l(mu_);
      faults_.push_back(f);
      res.set_content("{}", "application/json");
    });
    s.Delete("/_faults", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      faults_.clear();
      res.set_content("{}", "application/json");
    });
    s.Get("/_traces", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      res.set_content(json(traces_).dump(), "application/json");
    });
    s.Get("/_requests", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      res.set_content(json{{"requests", requests_}}.dump(), "application/json");
    });
    s.Post("/_reset", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      faults_.clear();
      requests_ = json::array();
      ops_.clear();
      by_key_.clear();
      by_route_.clear();
      fencing_.clear();
      fenced_.clear();
      traces_.clear();
      total_ = 0;
      routes_ = sagad::ExampleRoutes();
      res.set_content("{}", "application/json");
    });
    s.Get(R"(/operations/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::string key = req.matches[1];
      std::lock_guard<std::mutex> l(mu_);
      if (req.has_header("Saga-Attempt")) {
        int asked = std::atoi(req.get_header_value("Saga-Attempt").c_str());
        fenced_[key] = std::max(fenced_[key], asked);
      }
      Fault f;
      if ((TakeFault("/operations", &f) && f.action == "query_unknown") || Chance(chaos_ / 2)) {
        res.status = 503;
        return;
      }
      auto it = ops_.find(key);
      if (it == ops_.end() && pending_.count(key)) {
        res.status = 200;
        res.set_content(json{{"outcome", "in_progress"}}.dump(), "application/json");
        return;
      }
      if (it == ops_.end() && refused_.count(key)) {
        res.status = 200;
        res.set_content(refused_[key].dump(), "application/json");
        return;
      }
      if (it == ops_.end()) {
        res.status = 404;
        res.set_content(json{{"error", "no operation with this key"}}.dump(), "application/json");
        return;
      }
      res.status = 200;
      res.set_content(it->second.body, "application/json");
    });
    // A webhook sink for tests: records every delivery with its headers.
    s.Post("/_webhooks", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      webhooks_.push_back({{"id", req.get_header_value("Webhook-Id")},
                           {"timestamp", req.get_header_value("Webhook-Timestamp")},
                           {"signature", req.get_header_value("Webhook-Signature")},
                           {"body", req.body}});
      res.set_content("{}", "application/json");
    });
    s.Get("/_webhooks", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      res.set_content(json{{"deliveries", webhooks_}}.dump(), "application/json");
    });
    s.Post(R"(/.*)",
           [this](const httplib::Request& req, httplib::Response& res) { Post(req, res); });
  }

 private:
  // REQUIRES: mu_ held.
  bool TakeFault(const std::string& path, Fault* out) {
    for (auto it = faults_.begin(); it != faults_.end(); ++it) {
      if (path.compare(0, it->path.size(), it->path) != 0) continue;
      *out = *it;
      if (--it->times <= 0) faults_.erase(it);
      return true;
    }
    return false;
  }

  // REQUIRES: mu_ held.
  bool Chance(double p) { return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  // REQUIRES: mu_ held.
  bool RandomFault(const std::string& path, Fault* out) {
    if (!Chance(chaos_)) return false;
    static const std::regex kUndo(R"(.*/(close|release|restore|refund|cancel|recall)$)");
    bool undo = std::regex_match(path, kUndo);
    static const char* kActions[] = {"commit_drop", "commit_500", "fail_before_commit",
                                     "refuse",      "delay",      "reject"};
    int n = undo ? 5 : 6;
    out->action = kActions[std::uniform_int_distribution<int>(0, n - 1)(rng_)];
    out->delay_ms = out->action == std::string("delay") ? 400 : 0;
    out->status = 422;
    return true;
  }

  static void Reply(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
  }

  // Applies the business effect; returns status + body. REQUIRES: mu_ held.
  static long long NowMicros() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // Records one business request in /_requests when it is answered.
  struct RequestLog {
    Services* self;
    std::string key, path;
    long long start_us = NowMicros();
    ~RequestLog() {
      std::lock_guard<std::mutex> l(self->mu_);
      if (self->requests_.size() < 100000)
        self->requests_.push_back(
            {{"key", key}, {"path", path}, {"start_us", start_us}, {"end_us", NowMicros()}});
    }
  };

  void Post(const httplib::Request& req, httplib::Response& res) {
    RequestLog logged{this, req.get_header_value("Idempotency-Key"), req.path};
    json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
    if (body.is_discarded()) return Reply(res, 400, {{"error", "body is not JSON"}});
    std::string key = req.get_header_value("Idempotency-Key");
    std::string instance = req.get_header_value("Saga-Instance");
    std::string token_s = req.get_header_value("Saga-Fencing-Token");
    std::string hash = std::to_string(std::hash<std::string>()(body.dump()));
    Fault fault;
    bool faulted;
    int delay = 0;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!key.empty() && req.has_header("traceparent"))
        traces_[key].push_back({{"traceparent", req.get_header_value("traceparent")},
                                {"tracestate", req.get_header_value("tracestate")}});
      if (!instance.empty() && !token_s.empty()) {
        long long tok = std::atoll(token_s.c_str());
        long long& high = fencing_[instance];
        if (tok < high) return Reply(res, 409, {{"error", "stale fencing token " + token_s}});
        high = tok;
      }
      if (!key.empty() && req.has_header("Saga-Attempt")) {
        auto f = fenced_.find(key);
        if (f != fenced_.end() &&
            std::atoi(req.get_header_value("Saga-Attempt").c_str()) <= f->second)
          return Reply(res, 409,
                       {{"error", "attempt superseded: a reconciliation query fenced it"}});
      }
      faulted = TakeFault(req.path, &fault) || RandomFault(req.path, &fault);
      if (faulted) delay = fault.delay_ms;
      if (!key.empty()) ++pending_[key];
    }
    if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    std::lock_guard<std::mutex> l(mu_);
    if (!key.empty() && --pending_[key] == 0) pending_.erase(key);
    if (faulted) {
      if (fault.action == "reject" || fault.action == "reject_drop") {
        int st = fault.status ? fault.status : 422;
        json refusal = {{"error", "rejected by fault order"}};
        Refused(key, st, refusal);
        if (fault.action == "reject") return Reply(res, st, refusal);
        res.status = st;
        res.set_chunked_content_provider("application/json",
                                         [](size_t, httplib::DataSink&) { return false; });
        return;
      }
      if (fault.action == "refuse") return Reply(res, 429, {{"error", "slow down"}});
      if (fault.action == "fail_before_commit")
        return Reply(res, 500, {{"error", "failed before commit"}});
    }
    if (dedup_ && !key.empty()) {
      auto it = ops_.find(key);
      if (it != ops_.end()) {
        if (it->second.body_hash != hash)
          return Reply(res, 422, {{"error", "Idempotency-Key reused with a different body"}});
        res.set_header("Idempotent-Replayed", "true");
        res.status = it->second.status;
        res.set_content(it->second.body, "application/json");
        return;
      }
    }
    std::string route;
    auto [status, out] = routes_.Execute(req.path, body, &route);
    Refused(key, status, out);
    if (status >= 200 && status < 300) {
      ++total_;
      if (!key.empty()) ++by_key_[key];
      ++by_route_[route];
      if (!key.empty() && !ops_.count(key)) ops_[key] = Stored{status, out.dump(), hash};
    }
    if (faulted && fault.action == "commit_500")
      return Reply(res, 500, {{"error", "committed, then failed"}});
    if (faulted && fault.action == "commit_drop") {
      res.status = status;
      res.set_chunked_content_provider("application/json",
                                       [](size_t, httplib::DataSink&) { return false; });
      return;
    }
    Reply(res, status, out);
  }

  // REQUIRES: mu_ held. A definite refusal (4xx but 408/409/429) is kept
  // under its key for GET /operations; an effect later clears it.
  void Refused(const std::string& key, int status, const json& body) {
    if (key.empty()) return;
    bool definite =
        status >= 400 && status < 500 && status != 408 && status != 409 && status != 429;
    if (!definite) {
      if (status >= 200 && status < 300) refused_.erase(key);
      return;
    }
    refused_[key] = {{"outcome", "refused"},
                     {"http_status", status},
                     {"detail", body.value("error", "refused")}};
  }

  bool dedup_;
  double chaos_;
  std::mt19937 rng_;
  std::mutex mu_;
  std::deque<Fault> faults_;
  std::map<std::string, Stored> ops_;
  std::map<std::string, int> by_key_;
  std::map<std::string, int> by_route_;
  std::map<std::string, long long> fencing_;
  std::map<std::string, std::vector<json>> traces_;  // key -> trace headers of each request
  std::map<std::string, int> pending_;               // keys of requests being processed
  std::map<std::string, json> refused_;              // key -> stored refusal
  std::map<std::string, int> fenced_;                // key -> highest attempt a query fenced
  json webhooks_ = json::array();
  long long total_ = 0;
  json requests_ = json::array();  // GET /_requests
  sagad::ExampleRoutes routes_;    // what each service does (example_routes.h)
};

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 9000;
  bool dedup = true;
  double chaos = 0;
  unsigned seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--listen" && i + 1 < argc) {
      std::string v = argv[++i];
      size_t c = v.rfind(':');
      if (c == std::string::npos) {
        std::cerr << "example-services: --listen expects HOST:PORT\n";
        return 2;
      }
      host = v.substr(0, c);
      port = std::atoi(v.c_str() + c + 1);
    } else if (a == "--no-dedup") {
      dedup = false;
    } else if (a == "--chaos" && i + 1 < argc) {
      chaos = std::atof(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = static_cast<unsigned>(std::atoi(argv[++i]));
    } else {
      std::cerr
          << "usage: example-services [--listen HOST:PORT] [--no-dedup] [--chaos P] [--seed S]\n";
      return 2;
    }
  }
  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(512); };
  server.set_tcp_nodelay(true);
  server.set_keep_alive_max_count(1000);
  Services services(dedup, chaos, seed);
  services.Install(server);
  int bound =
      port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    std::cerr << "example-services: cannot bind " << host << ":" << port << "\n";
    return 1;
  }
  std::cout << "LISTENING " << bound << std::endl;
  server.listen_after_bind();
  return 0;
}
