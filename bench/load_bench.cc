// load_bench: order_fulfilment through sagad at concurrency 1, 16 and 64 with
// POST ...?wait=, against the engine-free baseline measured in the same run:
// the same three downstream POSTs made directly by the same driver threads
// over the same kind of keep-alive connections.
//
//   load_bench [--sagas N] [--levels 1,16,64] [--workers W]
// Build in Release first (BUILD_TYPE=Release scripts/build.sh).
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "tests/testing/cluster.h"

using nlohmann::json;
using namespace sagad::testing;
using Clock = std::chrono::steady_clock;

namespace {

double CpuMs(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream in(s.substr(s.rfind(')') + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return (utime + stime) * 1000.0 / sysconf(_SC_CLK_TCK);
}

double Metric(int port, const std::string& name) {
  Reply r = Http(port, "GET", "/metrics");
  std::istringstream in(r.raw);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return 0;
}

struct Result {
  double per_sec, p50, p99;
};

// Runs `n` jobs on `c` threads, each job timed; returns throughput and latency.
template <typename Job>
Result Drive(int n, int c, Job job) {
  std::atomic<int> next{0};
  std::vector<std::vector<double>> lat(c);
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < c; ++t)
    threads.emplace_back([&, t] {
      for (int i; (i = next++) < n;) {
        auto s = Clock::now();
        job(t, i);
        lat[t].push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
      }
    });
  for (auto& th : threads) th.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) { return all[std::min(all.size() - 1, size_t(p * all.size()))]; };
  return {n / secs, pct(0.50), pct(0.99)};
}

}  // namespace

int main(int argc, char** argv) {
  int sagas = 2000, workers = 64;
  std::vector<int> levels = {1, 16, 64};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--sagas") sagas = std::stoi(v);
    else if (a == "--workers") workers = std::stoi(v);
    else if (a == "--levels") {
      levels.clear();
      std::stringstream ss(v);
      for (std::string x; std::getline(ss, x, ',');) levels.push_back(std::stoi(x));
    } else {
      std::cerr << "usage: load_bench [--sagas N] [--levels 1,16,64] [--workers W]\n";
      return 2;
    }
  }
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  sagad.Configure({{"workers", workers}});
  if (sagad.Start() < 0) return 1;
  const int es = downstream.port(), sp = sagad.port();
  const std::string body = json{{"input", OrderInput()}}.dump();
  std::cout << "order_fulfilment (3 steps, fsync on), " << std::thread::hardware_concurrency()
            << " cores, sagad workers " << workers << "\n";
  std::cout << std::left << std::setw(6) << "conc" << std::setw(12) << "sagas/s" << std::setw(11)
            << "p50 ms" << std::setw(11) << "p99 ms" << std::setw(13) << "base sagas/s"
            << std::setw(9) << "ratio" << std::setw(14) << "sagad cpu ms" << std::setw(13)
            << "svc cpu ms" << "txns/saga\n";
  int64_t total = 0;
  bool ok = true;
  for (int c : levels) {
    int n = c == 1 ? std::min(sagas, 300) : sagas;
    // Engine-free baseline: the same three calls, made directly.
    std::vector<std::unique_ptr<httplib::Client>> direct(c);
    for (auto& cl : direct) {
      cl = std::make_unique<httplib::Client>("127.0.0.1", es);
      cl->set_keep_alive(true);
      cl->set_tcp_nodelay(true);
      cl->Get("/_effects");  // connect now, one by one
    }
    static std::atomic<int> seq{0};
    Result base = Drive(n, c, [&](int t, int) {
      std::string k = "base-" + std::to_string(seq++);
      json in = OrderInput();
      direct[t]->Post("/reservations", {{"Idempotency-Key", k + ":r"}},
                      json{{"sku", in["sku"]}, {"qty", in["qty"]}}.dump(), "application/json");
      direct[t]->Post("/charges", {{"Idempotency-Key", k + ":c"}},
                      json{{"amount", in["amount"]}, {"currency", in["currency"]}, {"customer", in["customer"]}}.dump(),
                      "application/json");
      direct[t]->Post("/shipments", {{"Idempotency-Key", k + ":s"}},
                      json{{"address", in["address"]}}.dump(), "application/json");
    });
    // Through sagad.
    std::vector<std::unique_ptr<httplib::Client>> clients(c);
    for (auto& cl : clients) {
      cl = std::make_unique<httplib::Client>("127.0.0.1", sp);
      cl->set_keep_alive(true);
      cl->set_tcp_nodelay(true);
      cl->set_read_timeout(60, 0);
      cl->Get("/healthz");  // connect now, one by one: the listen backlog is small
    }
    double cpu0 = CpuMs(sagad.process().pid()), es0 = CpuMs(downstream.pid());
    double tx0 = Metric(sp, "sagad_store_commit_seconds_count");
    std::atomic<int> failures{0};
    Result r = Drive(n, c, [&](int t, int) {
      auto res = clients[t]->Post("/v1/sagas/order_fulfilment/instances?wait=30", body, "application/json");
      if (!res || res->status != 200 || res->body.find("\"COMPLETED\"") == std::string::npos) {
        if (++failures <= 3)
          std::cerr << "failure: " << (res ? std::to_string(res->status) + " " + res->body.substr(0, 300)
                                           : "no response: " + httplib::to_string(res.error()))
                    << "\n";
      }
    });
    double cpu = CpuMs(sagad.process().pid()) - cpu0, escpu = CpuMs(downstream.pid()) - es0;
    double txns = Metric(sp, "sagad_store_commit_seconds_count") - tx0;
    total += n;
    if (failures) ok = false;
    std::cout << std::left << std::fixed << std::setprecision(1) << std::setw(6) << c << std::setw(12)
              << r.per_sec << std::setw(11) << r.p50 << std::setw(11) << r.p99 << std::setw(13)
              << base.per_sec << std::setw(9) << std::setprecision(3) << r.per_sec / base.per_sec
              << std::setprecision(2) << std::setw(14) << cpu / n << std::setw(13) << escpu / n
              << txns / n << (failures ? "  FAILURES: " + std::to_string(failures.load()) : "")
              << "\n";
  }
  json e = downstream.Effects();
  // Baseline calls count too: 3 per baseline saga and 3 per sagad saga.
  bool effects_ok = e["total"].get<int64_t>() == 6 * total && e["duplicates"] == 0;
  std::cout << "effects: " << e["total"] << " (expected " << 6 * total << ", half of them the baseline's), duplicates "
            << e["duplicates"] << "\n";
  return ok && effects_ok ? 0 : 1;
}
