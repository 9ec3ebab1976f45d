// chaos_bench: N sagas against example-services with random faults on every
// service, while sagad is SIGKILLed at random intervals and restarted on the
// same data dir. Approves or rejects approval steps as they appear. At the end
// it checks that no effect happened twice and no submitted instance was lost,
// and prints the reliability figures.
//
//   chaos_bench [--sagas 2000] [--concurrency 16] [--chaos 0.1]
//               [--kill-ms 300:1500] [--seed 1] [--no-dedup] [--reject 0.2]
//               [--store postgres|postgresql://... [--db-restart-ms 10000:20000]]
//               [--coordinators 2]   several sagad on one store, a random one killed
// Exit code 0 only if duplicates == 0, lost == 0 and every instance is
// terminal or in NEEDS_REVIEW with a reason.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "tests/testing/cluster.h"
#include "tests/testing/postgres.h"

using nlohmann::json;
using namespace sagad::testing;

namespace {

void Pause(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(std::ceil(p * v.size())) - 1);
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  int sagas = 2000, concurrency = 16, kill_min = 300, kill_max = 1500;
  double chaos = 0.1, reject = 0.2;
  unsigned seed = 1;
  bool dedup = true;
  std::string store;     // "postgres" (a server of its own) or a postgresql:// URI
  int coordinators = 1;  // sagad processes sharing the store
  int db_restart_min = 0, db_restart_max = 0;  // immediate PostgreSQL restarts (own server only)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--sagas")
      sagas = std::stoi(next());
    else if (a == "--concurrency")
      concurrency = std::stoi(next());
    else if (a == "--chaos")
      chaos = std::stod(next());
    else if (a == "--reject")
      reject = std::stod(next());
    else if (a == "--seed")
      seed = static_cast<unsigned>(std::stoi(next()));
    else if (a == "--no-dedup")
      dedup = false;
    else if (a == "--store")
      store = next();
    else if (a == "--coordinators")
      coordinators = std::max(1, std::stoi(next()));
    else if (a == "--db-restart-ms") {
      std::string v = next();
      db_restart_min = std::stoi(v.substr(0, v.find(':')));
      db_restart_max = std::stoi(v.substr(v.find(':') + 1));
    } else if (a == "--kill-ms") {
      std::string v = next();
      kill_min = std::stoi(v.substr(0, v.find(':')));
      kill_max = std::stoi(v.substr(v.find(':') + 1));
    } else {
      std::cerr
          << "usage: chaos_bench [--sagas N] [--concurrency C] [--chaos P] [--reject P] "
             "[--kill-ms MIN:MAX] [--seed S] [--no-dedup]\n"
             "  [--store postgres|postgresql://... [--db-restart-ms MIN:MAX]] [--coordinators N]\n";
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  std::vector<std::string> es_argv = {
      EXAMPLE_SERVICES_BIN,  "--listen", "127.0.0.1:0",       "--chaos",
      std::to_string(chaos), "--seed",   std::to_string(seed)};
  if (!dedup) es_argv.push_back("--no-dedup");
  Subprocess services(es_argv);
  int es_port = services.WaitForPort();
  if (es_port < 0) {
    std::cerr << "example-services did not start\n";
    return 1;
  }
  std::string es_url = "http://127.0.0.1:" + std::to_string(es_port);
  json svc = json::object();
  for (const char* name : {"ticketing", "edr", "iam", "mail", "inventory", "payments", "shipping",
                           "airline", "hotel", "cars"})
    svc[name] = {
        {"base_url", es_url}, {"timeout_ms", 300}, {"idempotent", dedup}, {"queryable", true}};
  // One or more coordinators (distinct coordinator_id, the same store).
  std::vector<int> ports;
  std::vector<std::string> config_paths;
  std::string db = store.empty()         ? ""
                   : store == "postgres" ? PostgresServer::Shared().NewDatabase()
                                         : store;
  for (int k = 0; k < coordinators; ++k) {
    ports.push_back(FreePort());
    json config = {{"listen", "127.0.0.1:" + std::to_string(ports[k])},
                   {"data_dir", dir.path() + "/data"},
                   {"services", svc},
                   {"workers", 16},
                   {"coordinator_id", "chaos-" + std::to_string(k)},
                   {"log_level", "debug"},  // the figures below come from every call's line
                   {"examples", true}};
    if (!db.empty()) config["store"] = db;
    config_paths.push_back(dir.path() + "/config" + std::to_string(k) + ".json");
    std::ofstream(config_paths[k]) << config.dump();
  }
  const int port = ports[0];  // reads and the final count go here
  const bool restart_db = store == "postgres" && db_restart_max > 0;
  std::string log_path = dir.path() + "/sagad.log";

  std::mutex sagad_mu;
  std::vector<std::unique_ptr<Subprocess>> sagads(coordinators);
  auto start_sagad = [&](int k) {
    sagads[k] = std::make_unique<Subprocess>(
        std::vector<std::string>{SAGAD_BIN, "--config", config_paths[k]},
        std::map<std::string, std::string>{}, log_path);
    return sagads[k]->WaitForPort(std::chrono::seconds(60)) == ports[k];
  };
  for (int k = 0; k < coordinators; ++k) {
    if (!start_sagad(k)) {
      std::cerr << "sagad did not start\n";
      return 1;
    }
  }

  std::atomic<int> next{0}, submitted{0};
  std::atomic<bool> submitting_done{false}, stop{false};
  std::vector<std::string> ids(sagas);
  auto t0 = std::chrono::steady_clock::now();

  // Submitters: retry each submission with its key until sagad answers.
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      for (int i; (i = next++) < sagas;) {
        // Three sagas in turn: a list, a list with a human step, a graph.
        static const char* kSagas[] = {"order_fulfilment", "incident_response", "trip_booking"};
        std::string saga = kSagas[i % 3];
        json input = i % 3 == 0 ? OrderInput() : i % 3 == 1 ? IncidentInput() : TripInput();
        input["n"] = i;
        std::string body = json{{"input", input}}.dump();
        while (true) {
          Reply r = Http(ports[i % coordinators], "POST", "/v1/sagas/" + saga + "/instances", body,
                         {{"Idempotency-Key", "chaos-" + std::to_string(i)}});
          if ((r.status == 200 || r.status == 201) && r.body.is_object()) {
            ids[i] = r.body["id"];
            ++submitted;
            break;
          }
          Pause(20);  // sagad is restarting (or 409 in flight): try again
        }
      }
    });
  }

  // Approver: approve most approval steps, reject some.
  std::mt19937 rng(seed);
  std::thread approver([&] {
    std::mt19937 arng(seed + 1);
    while (!stop) {
      Reply r = Http(port, "GET", "/v1/approvals");
      if (r.status == 200 && r.body.is_object()) {
        for (const auto& a : r.body["approvals"]) {
          bool rej = std::uniform_real_distribution<double>(0, 1)(arng) < reject;
          Http(port, "POST",
               "/v1/instances/" + a["instance_id"].get<std::string>() + "/steps/" +
                   a["step"].get<std::string>() + (rej ? "/reject" : "/approve"),
               "{}");
        }
      }
      Pause(50);
    }
  });

  // Killer: SIGKILL sagad at random intervals while work remains.
  int kills = 0;
  auto all_settled = [&](json* counts) {
    int settled = 0, total = 0;
    json c = json::object();
    for (const char* st : {"COMPLETED", "COMPENSATED", "NEEDS_REVIEW", "RUNNING",
                           "AWAITING_APPROVAL", "COMPENSATING"}) {
      std::string cursor;
      int n = 0;
      while (true) {
        Reply r = Http(port, "GET",
                       std::string("/v1/instances?limit=500&status=") + st +
                           (cursor.empty() ? "" : "&cursor=" + cursor));
        if (r.status != 200 || !r.body.is_object()) return false;
        n += static_cast<int>(r.body["instances"].size());
        if (r.body["next_cursor"].is_null()) break;
        cursor = r.body["next_cursor"];
      }
      c[st] = n;
      total += n;
      if (std::string(st) == "COMPLETED" || std::string(st) == "COMPENSATED" ||
          std::string(st) == "NEEDS_REVIEW")
        settled += n;
    }
    if (counts) *counts = c;
    return submitting_done && total == sagas && settled == sagas;
  };
  std::thread killer([&] {
    while (!stop) {
      Pause(std::uniform_int_distribution<int>(kill_min, kill_max)(rng));
      if (stop) break;
      std::lock_guard<std::mutex> l(sagad_mu);
      int k = std::uniform_int_distribution<int>(0, coordinators - 1)(rng);
      sagads[k]->Kill(SIGKILL);
      sagads[k]->Wait();
      ++kills;
      if (!start_sagad(k)) {
        std::cerr << "sagad did not restart\n";
        std::exit(1);
      }
    }
  });

  // Database crasher: pg_ctl restart -m immediate at random intervals.
  int db_restarts = 0;
  std::thread db_killer([&] {
    std::mt19937 drng(seed + 2);
    while (restart_db && !stop) {
      Pause(std::uniform_int_distribution<int>(db_restart_min, db_restart_max)(drng));
      if (stop) break;
      PostgresServer::Shared().RestartImmediately();
      ++db_restarts;
    }
  });

  for (auto& t : workers) t.join();
  submitting_done = true;
  // Keep killing until nothing is left to do: every unfinished instance is in
  // NEEDS_REVIEW (read cheaply from the gauge of unfinished instances).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (std::chrono::steady_clock::now() < deadline) {
    Reply m = Http(port, "GET", "/metrics");
    // The gauge is absent while the store cannot be read (a database
    // restart): that is no answer, not "nothing busy".
    if (m.status == 200 && m.raw.find("\nsagad_instances_active ") != std::string::npos) {
      int busy = 0;
      std::istringstream lines(m.raw);
      std::string line;
      while (std::getline(lines, line))
        if (line.rfind("sagad_instances{", 0) == 0 &&
            line.find("NEEDS_REVIEW") == std::string::npos)
          busy += std::atoi(line.substr(line.rfind(' ') + 1).c_str());
      if (busy == 0) break;
    }
    Pause(200);
  }
  stop = true;
  killer.join();
  db_killer.join();
  approver.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The full count, with sagad left running. A database that was restarted
  // last may still be refusing reads (503): ask again until it answers.
  json counts;
  bool settled = false;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       !(settled = all_settled(&counts)) && counts.is_null() &&
       std::chrono::steady_clock::now() < until;)
    Pause(200);
  if (counts.is_null()) counts = json::object();

  // Effects, lost instances, reasons.
  json effects = Http(es_port, "GET", "/_effects").body;
  int lost = 0, review_without_reason = 0, compensation_review = 0;
  for (int i = 0; i < sagas; ++i) {
    Reply r = Http(port, "GET", "/v1/instances/" + ids[i]);
    if (r.status != 200) {
      ++lost;
      continue;
    }
    std::string reason = r.body.value("review_reason", "");
    if (r.body["status"] == "NEEDS_REVIEW" && reason.empty()) ++review_without_reason;
    if (r.body["status"] == "NEEDS_REVIEW" && reason.find("compensation") != std::string::npos)
      ++compensation_review;
  }

  // Figures from sagad's logs (they survive the restarts).
  std::ifstream log(log_path);
  std::string line;
  double calls = 0, unknown = 0, queries = 0, answered = 0, replays = 0;
  std::vector<double> recovery_ms;
  while (std::getline(log, line)) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    std::string msg = j.value("msg", "");
    if (msg == "step call" || msg == "compensation call") {
      ++calls;
      unknown += j.value("outcome", "") == "unknown";
    } else if (msg == "reconcile") {
      ++queries;
      answered += j.value("answer", "") != "unknown";
    } else if (msg == "recovered") {
      recovery_ms.push_back(j.value("ms", 0.0));
    } else if (msg == "replayed") {
      ++replays;
    }
  }
  double mean_rec = 0;
  for (double v : recovery_ms) mean_rec += v;
  if (!recovery_ms.empty()) mean_rec /= recovery_ms.size();
  int compensated = counts.value("COMPENSATED", 0), review = counts.value("NEEDS_REVIEW", 0);

  std::cout << "chaos benchmark: " << sagas << " sagas, concurrency " << concurrency
            << ", fault rate " << chaos << ", " << (dedup ? "deduplicating" : "NON-deduplicating")
            << " downstream, seed " << seed << "\n";
  std::cout << "  wall time                " << seconds << " s\n";
  std::cout << "  instances                " << counts.dump() << "\n";
  std::cout << "  store                    " << (store.empty() ? "LMDB" : "PostgreSQL") << "\n";
  std::cout << "  coordinators             " << coordinators << "\n";
  std::cout << "  sagad SIGKILLs           " << kills << "\n";
  std::cout << "  PostgreSQL crashes       " << db_restarts << "\n";
  std::cout << "  duplicate effects        " << effects.value("duplicates", -1) << "\n";
  std::cout << "  lost instances           " << lost << "\n";
  std::cout << "  all settled              " << (settled ? "yes" : "NO") << "\n";
  std::cout << "  review without reason    " << review_without_reason << "\n";
  std::cout << "  unknown-outcome rate     " << (calls ? unknown / calls : 0) << " (" << unknown
            << " of " << calls << " calls)\n";
  std::cout << "  reconciliation success   " << (queries ? answered / queries : 0) << " ("
            << answered << " of " << queries << " queries answered)\n";
  std::cout << "  human escalation rate    " << double(review) / sagas << "\n";
  std::cout << "  compensation success     "
            << (compensated + compensation_review
                    ? double(compensated) / (compensated + compensation_review)
                    : 1.0)
            << " (" << compensated << " compensated, " << compensation_review
            << " compensations needing review)\n";
  std::cout << "  recovery latency         mean " << mean_rec << " ms, p99 "
            << Percentile(recovery_ms, 0.99) << " ms (" << recovery_ms.size() << " recoveries)\n";
  std::cout << "  replays per instance     " << replays / sagas << "\n";
  bool ok =
      effects.value("duplicates", -1) == 0 && lost == 0 && settled && review_without_reason == 0;
  if (!ok) {
    for (const auto& [key, n] : effects["by_key"].items())
      if (n.get<int>() > 1) std::cout << "  duplicated: " << key << " x" << n << "\n";
    std::string keep = "/tmp/chaos-failed-log";
    std::ifstream src(log_path, std::ios::binary);
    std::ofstream(keep, std::ios::binary) << src.rdbuf();
    std::cout << "  sagad log kept in " << keep << "\n";
  }
  std::cout << (ok ? "PASS" : "FAIL") << "\n";
  return ok ? 0 : 1;
}
