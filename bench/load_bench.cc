// load_bench: order_fulfilment through sagad at concurrency 1, 16 and 64 with
// POST ...?wait=, against the engine-free baseline measured in the same run:
// the same three downstream POSTs made directly by the same driver threads
// over the same kind of keep-alive connections.
//
//   load_bench [--sagas N] [--levels 1,16,64] [--workers W (sagad workers; default sagad's)]
//       [--api-threads T (sagad's api.threads; default sagad's)]
//       [--keyed]   the client the README shows: an Idempotency-Key per
//       submission (with ?wait on keep-alive connections), then a replay of
//       a third of them, each checked to answer the first instance with
//       Idempotent-Replayed (the replays are not timed)
//   load_bench --preload 1000000 [--levels 64]   store-size: the same levels
//       on an empty store, then with N finished instances stored (best of
//       two runs per level on each side)
//   load_bench --recovery 10000                  time to resume N in-flight
//       instances after a SIGKILL
//   load_bench --store postgres|postgresql://...   the same levels on
//       PostgreSQL in the same run (a server of its own for "postgres"),
//       then two coordinators sharing it
//   load_bench --soak-minutes 60 --retention-ms 60000   the same for a time,
//       reported every 5 minutes, with agent runs beside the sagas
//   load_bench --soak 1000000 --retention-ms 60000   data file and RSS over a
//       long run with retention
//   load_bench --pg-list 3000000   GET /v1/instances?status=NEEDS_REVIEW on
//       PostgreSQL, empty store vs N finished instances
//   load_bench --graph 300   trip_booking (three bookings in parallel, each
//       held 50 ms downstream, then the charge) up to its approval, at
//       concurrency 1 and 16, against two baselines measured in the same
//       run: one booking, and the four calls made one after another
// Every mode prints sagad's RSS (anonymous and file-backed) idle and after.
// Build in Release first (BUILD_TYPE=Release scripts/build.sh).
#include <httplib.h>
#include <libpq-fe.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "coordinator/server/config.h"
#include "tests/testing/cluster.h"
#include "tests/testing/postgres.h"

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

// One scrape of /metrics: each metric by name, summed over its labels.
std::map<std::string, double> Metrics(int port) {
  Reply r = Http(port, "GET", "/metrics");
  std::istringstream in(r.raw);
  std::map<std::string, double> sums;
  for (std::string line; std::getline(in, line);) {
    size_t end = line.find_first_of("{ ");
    if (line.empty() || line[0] == '#' || end == std::string::npos) continue;
    sums[line.substr(0, end)] += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sums;
}

double Metric(int port, const std::string& name) { return Metrics(port)[name]; }

// The fields of /proc/PID/status ("VmRSS" -> "123456 kB", "Threads" -> "13").
std::map<std::string, std::string> ProcStatus(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::map<std::string, std::string> fields;
  for (std::string line; std::getline(f, line);) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    size_t value = line.find_first_not_of(" \t", colon + 1);
    fields[line.substr(0, colon)] = value == std::string::npos ? "" : line.substr(value);
  }
  return fields;
}

// The threads of a process.
std::string Threads(pid_t pid) {
  auto fields = ProcStatus(pid);
  auto it = fields.find("Threads");
  return it == fields.end() ? "?" : it->second;
}

// VmRSS, RssAnon and RssFile of a process, in MB.
std::string Rss(pid_t pid) {
  auto fields = ProcStatus(pid);
  std::string out;
  for (const char* k : {"VmRSS", "RssAnon", "RssFile"}) {
    auto it = fields.find(k);
    if (it == fields.end()) continue;
    std::ostringstream o;
    o << std::fixed << std::setprecision(1) << k << ": " << std::stod(it->second) / 1024 << " MB  ";
    out += o.str();
  }
  return out;
}

// Clones the first finished instance in `dir` (snapshot, events, operation
// records) `n` times under new ids, straight into LMDB (sagad stopped), in
// large transactions without fsync, then syncs once. The clones have the
// size and key layout of real finished instances.
bool Preload(const std::string& dir, int64_t n) {
  MDB_env* env = nullptr;
  mdb_env_create(&env);
  mdb_env_set_maxdbs(env, 16);
  mdb_env_set_mapsize(env, size_t(64) << 30);
  if (mdb_env_open(env, dir.c_str(), MDB_NOSYNC, 0644) != 0) return false;
  MDB_txn* txn = nullptr;
  MDB_dbi inst, events, ops;
  mdb_txn_begin(env, nullptr, 0, &txn);
  mdb_dbi_open(txn, "instances", 0, &inst);
  mdb_dbi_open(txn, "events", 0, &events);
  mdb_dbi_open(txn, "operations", 0, &ops);
  auto str = [](const MDB_val& v) {
    return std::string(static_cast<const char*>(v.mv_data), v.mv_size);
  };
  std::string id0, snap0;
  std::vector<std::pair<std::string, std::string>> ev0, op0;
  MDB_cursor* c = nullptr;
  MDB_val k, v;
  mdb_cursor_open(txn, inst, &c);
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
    if (str(v).find("\"status\":\"COMPLETED\"") != std::string::npos) {
      id0 = str(k);
      snap0 = str(v);
      break;
    }
  mdb_cursor_close(c);
  if (id0.empty()) return false;
  for (MDB_dbi db : {events, ops}) {
    mdb_cursor_open(txn, db, &c);
    for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
      if (str(k).rfind(id0, 0) == 0) (db == events ? ev0 : op0).emplace_back(str(k), str(v));
    mdb_cursor_close(c);
  }
  auto with_id = [&](std::string s, const std::string& id) {
    for (size_t p = 0; (p = s.find(id0, p)) != std::string::npos; p += id.size())
      s.replace(p, id0.size(), id);
    return s;
  };
  auto put = [&](MDB_dbi db, const std::string& key, const std::string& val) {
    MDB_val kk{key.size(), const_cast<char*>(key.data())},
        vv{val.size(), const_cast<char*>(val.data())};
    return mdb_put(txn, db, &kk, &vv, 0) == 0;
  };
  for (int64_t i = 0; i < n; ++i) {
    char id[40];
    std::snprintf(id, sizeof id, "000000000000-%016llx", static_cast<unsigned long long>(i));
    if (!put(inst, id, with_id(snap0, id))) return false;
    for (auto& [ek, evv] : ev0)
      if (!put(events, with_id(ek, id), with_id(evv, id))) return false;
    for (auto& [ok, ov] : op0)
      if (!put(ops, with_id(ok, id), with_id(ov, id))) return false;
    if ((i + 1) % 20000 == 0) {
      if (mdb_txn_commit(txn) != 0) return false;
      mdb_txn_begin(env, nullptr, 0, &txn);
    }
  }
  bool ok = mdb_txn_commit(txn) == 0 && mdb_env_sync(env, 1) == 0;
  mdb_env_close(env);
  return ok;
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

// c keep-alive clients of port, each connected now (one GET of `path`), one
// by one: cpp-httplib's listen backlog is small. read_timeout_s 0: default.
std::vector<std::unique_ptr<httplib::Client>> Connected(int c, int port, const char* path,
                                                        int read_timeout_s = 0) {
  std::vector<std::unique_ptr<httplib::Client>> out(c);
  for (auto& cl : out) {
    cl = std::make_unique<httplib::Client>("127.0.0.1", port);
    cl->set_keep_alive(true);
    cl->set_tcp_nodelay(true);
    if (read_timeout_s > 0) cl->set_read_timeout(read_timeout_s, 0);
    cl->Get(path);
  }
  return out;
}

struct Bench {
  Downstream& downstream;
  Coordinator& sagad;
  int sagas;
  Coordinator* second = nullptr;  // a second sagad on the same store: clients alternate
  int64_t total = 0;              // sagas driven through sagad (each also once in the baseline)
  bool ok = true;
  bool keyed = false;  // an Idempotency-Key per submission, then replays of a third

  void Header() {
    std::cout << std::left << std::setw(6) << "conc" << std::setw(12) << "sagas/s" << std::setw(11)
              << "p50 ms" << std::setw(11) << "p99 ms" << std::setw(13) << "base sagas/s"
              << std::setw(9) << "ratio" << std::setw(14) << "sagad cpu ms" << std::setw(13)
              << "svc cpu ms" << std::setw(11) << "txns/saga"
              << "fsyncs/saga\n";
  }

  // One row: the baseline, then the same load through sagad. Returns sagas/s.
  // Returns {sagas/s, ratio to the baseline of the same row}.
  std::pair<double, double> Level(int c) {
    const int es = downstream.port(), sp = sagad.port();
    const std::string body = json{{"input", OrderInput()}}.dump();
    int n = c == 1 ? std::min(sagas, 300) : sagas;
    // Engine-free baseline: the same three calls, made directly.
    auto direct = Connected(c, es, "/_effects");
    static std::atomic<int> seq{0};
    Result base = Drive(n, c, [&](int t, int) {
      std::string k = "base-" + std::to_string(seq++);
      json in = OrderInput();
      direct[t]->Post("/reservations", {{"Idempotency-Key", k + ":r"}},
                      json{{"sku", in["sku"]}, {"qty", in["qty"]}}.dump(), "application/json");
      direct[t]->Post(
          "/charges", {{"Idempotency-Key", k + ":c"}},
          json{{"amount", in["amount"]}, {"currency", in["currency"]}, {"customer", in["customer"]}}
              .dump(),
          "application/json");
      direct[t]->Post("/shipments", {{"Idempotency-Key", k + ":s"}},
                      json{{"address", in["address"]}}.dump(), "application/json");
    });
    // Through sagad.
    auto clients = Connected(c, sp, "/healthz", 60);
    if (second) {
      auto others = Connected(c, second->port(), "/healthz", 60);
      for (int t = 1; t < c; t += 2) clients[t] = std::move(others[t]);
    }
    auto sagad_cpu = [&] {
      return CpuMs(sagad.process().pid()) + (second ? CpuMs(second->process().pid()) : 0.0);
    };
    double cpu0 = sagad_cpu(), es0 = CpuMs(downstream.pid());
    double tx0 = Metric(sp, "sagad_store_commit_seconds_count");
    double sync0 = Metric(sp, "sagad_store_synced_commits_total");
    std::atomic<int> failures{0};
    static std::atomic<int> keys{0};
    const int first_key = keys.fetch_add(n);
    std::vector<std::string> ids(n);
    auto key_of = [&](int i) { return "bench-key-" + std::to_string(first_key + i); };
    Result r = Drive(n, c, [&](int t, int i) {
      httplib::Headers h;
      if (keyed) h.emplace("Idempotency-Key", key_of(i));
      auto res = clients[t]->Post("/v1/sagas/order_fulfilment/instances?wait=30", h, body,
                                  "application/json");
      if (res && keyed) ids[i] = json::parse(res->body, nullptr, false).value("id", "");
      if (!res || res->status != 200 || res->body.find("\"COMPLETED\"") == std::string::npos) {
        if (++failures <= 3)
          std::cerr << "failure: "
                    << (res ? std::to_string(res->status) + " " + res->body.substr(0, 300)
                            : "no response: " + httplib::to_string(res.error()))
                    << "\n";
      }
    });
    double cpu = sagad_cpu() - cpu0, escpu = CpuMs(downstream.pid()) - es0;
    double txns = Metric(sp, "sagad_store_commit_seconds_count") - tx0;
    double syncs = Metric(sp, "sagad_store_synced_commits_total") - sync0;
    if (second) {  // the second's counters moved from zero in this row only if it is new
      txns = syncs = std::nan("");
    }
    total += n;
    if (keyed) {  // a third again: the same instance, said to be a replay
      std::atomic<int> wrong{0};
      Drive((n + 2) / 3, c, [&](int t, int j) {
        const int i = j * 3;
        auto res = clients[t]->Post("/v1/sagas/order_fulfilment/instances?wait=30",
                                    {{"Idempotency-Key", key_of(i)}}, body, "application/json");
        if (!res || res->status != 200 || res->get_header_value("Idempotent-Replayed") != "true" ||
            json::parse(res->body, nullptr, false).value("id", "") != ids[i])
          if (++wrong <= 3)
            std::cerr << "replay of " << key_of(i) << " wrong: "
                      << (res ? std::to_string(res->status) + " " + res->body.substr(0, 300)
                              : std::string("no response"))
                      << "\n";
      });
      failures += wrong.load();
    }
    if (failures) ok = false;
    std::cout << std::left << std::fixed << std::setprecision(1) << std::setw(6) << c
              << std::setw(12) << r.per_sec << std::setw(11) << r.p50 << std::setw(11) << r.p99
              << std::setw(13) << base.per_sec << std::setw(9) << std::setprecision(3)
              << r.per_sec / base.per_sec << std::setprecision(2) << std::setw(14) << cpu / n
              << std::setw(13) << escpu / n << std::setw(11) << txns / n << syncs / n
              << (failures ? "  FAILURES: " + std::to_string(failures.load()) : "") << "\n";
    return {r.per_sec, r.per_sec / base.per_sec};
  }

  // Every saga's three calls happened once (baseline ones too), none twice.
  bool EffectsOk(int64_t extra) {
    json e = downstream.Effects();
    int64_t want = 6 * total + extra;
    std::cout << "effects: " << e["total"] << " (expected " << want
              << ", half of the load's the baseline's), duplicates " << e["duplicates"] << "\n";
    return e["total"].get<int64_t>() == want && e["duplicates"] == 0;
  }
};

// Recovery: n instances in flight (their first call held up downstream, most
// still queued in the driver pool) when sagad is SIGKILLed; then a restart,
// timed until every instance was resumed (its first step sent again or
// asked about: sagad_recovery_latency_seconds_count reaches n) and until all
// completed.
int RecoveryMode(Downstream& downstream, Coordinator& sagad, int n) {
  downstream.Fault(
      {{"path", "/reservations"}, {"action", "delay"}, {"delay_ms", 3000}, {"times", 1000000}});
  const std::string body = json{{"input", OrderInput()}}.dump();
  std::atomic<int> submitted{0};
  Drive(n, 16, [&](int, int i) {
    Reply r;  // a fresh connection each: one refused (small backlog) is sent again, same key
    for (int attempt = 0; attempt < 5 && r.status == 0; ++attempt)
      r = Http(sagad.port(), "POST", "/v1/sagas/order_fulfilment/instances", body,
               {{"Idempotency-Key", "recovery-" + std::to_string(i)}});
    if (r.status == 201)
      ++submitted;
    else
      std::cerr << "submit: " << r.status << " " << r.raw.substr(0, 200) << "\n";
  });
  if (submitted != n) return 1;
  std::cout << "submitted " << n << " instances (first step held up downstream); "
            << Rss(sagad.process().pid()) << "\n";
  sagad.Kill();
  Http(downstream.port(), "DELETE", "/_faults");
  auto t0 = Clock::now();
  if (sagad.Start() < 0) return 1;
  double started = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  double resumed = -1, done = -1, resumed_cpu = 0;
  double polled = -1e9;
  WaitFor(
      [&] {
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        // Every 50 ms (the resolution of the figures): a /metrics scrape lists
        // the unfinished instances, which is work taken from the recovery.
        if (ms - polled < 50) return false;
        polled = ms;
        if (resumed < 0 && Metric(sagad.port(), "sagad_recovery_latency_seconds_count") >= n) {
          resumed = ms;
          resumed_cpu = CpuMs(sagad.process().pid());
        }
        // Cheap to poll: sagad's gauge (the index of unfinished instances), not
        // the downstream's effect list (which lists every key).
        if (done < 0 && resumed >= 0 && Metric(sagad.port(), "sagad_instances_active") == 0)
          done = ms;
        return resumed >= 0 && done >= 0;
      },
      std::chrono::seconds(300));
  // Held-up first calls that took effect before the kill are replayed, not
  // repeated (deduplicating downstream): 3 effects per instance.
  json e = downstream.Effects();
  bool effects_ok = e["total"].get<int64_t>() == 3 * n && e["duplicates"] == 0;
  std::cout << std::fixed << std::setprecision(0) << "recovery of " << n
            << " in-flight instances: sagad serving after " << started << " ms, all resumed after "
            << resumed << " ms (sagad CPU by then " << resumed_cpu << " ms), all completed after "
            << done << " ms (from restart); duplicates " << e["duplicates"] << ", effects "
            << e["total"] << " (expected " << 3 * n << "); " << Rss(sagad.process().pid()) << "\n";
  // What the recovery cost in engine work (a variant that is slower without
  // more CPU per action shows here as more of them).
  auto m = Metrics(sagad.port());
  std::cout << "after recovery: events " << m["sagad_events_total"] << ", step calls "
            << m["sagad_step_calls_total"] << ", questions " << m["sagad_reconciliations_total"]
            << ", re-sends " << m["sagad_retries_total"] << ", sends withheld "
            << m["sagad_sends_withheld_total"] << "\n";
  return resumed >= 0 && done >= 0 && effects_ok ? 0 : 1;
}

// Graph mode: how long trip_booking takes to reach its approval when each
// booking is held 50 ms downstream, next to one booking alone and to the
// same four calls made one after another (what a list of steps would take).
int GraphMode(Downstream& downstream, Coordinator& sagad, int n) {
  for (const char* path : {"/flights/holds", "/hotels/bookings", "/cars/rentals"})
    downstream.Fault({{"path", path}, {"action", "delay"}, {"delay_ms", 50}, {"times", 100000000}});
  const json in = TripInput();
  const std::string body = json{{"input", in}}.dump();
  static std::atomic<int> seq{0};
  auto booking = [&](httplib::Client& cl, const std::string& k) {
    cl.Post("/flights/holds", {{"Idempotency-Key", k + ":f"}},
            json{{"flight", in["flight"]}, {"passenger", in["traveller"]}}.dump(),
            "application/json");
  };
  std::cout << "trip_booking to its approval, each booking held 50 ms downstream\n"
            << std::left << std::setw(6) << "conc" << std::setw(14) << "one booking"
            << std::setw(16) << "sequential p50" << std::setw(12) << "graph p50" << std::setw(12)
            << "graph p99" << std::setw(10) << "sagas/s"
            << "graph / one booking\n";
  int failures = 0;
  for (int c : {1, 16}) {
    auto direct = Connected(c, downstream.port(), "/_effects");
    Result one =
        Drive(n, c, [&](int t, int) { booking(*direct[t], "one-" + std::to_string(seq++)); });
    Result sequential = Drive(n, c, [&](int t, int) {
      std::string k = "seq-" + std::to_string(seq++);
      booking(*direct[t], k);
      direct[t]->Post(
          "/hotels/bookings", {{"Idempotency-Key", k + ":h"}},
          json{{"hotel", in["hotel"]}, {"nights", in["nights"]}, {"guest", in["traveller"]}}.dump(),
          "application/json");
      direct[t]->Post(
          "/cars/rentals", {{"Idempotency-Key", k + ":c"}},
          json{{"pickup", in["pickup"]}, {"days", in["days"]}, {"driver", in["traveller"]}}.dump(),
          "application/json");
      direct[t]->Post(
          "/charges", {{"Idempotency-Key", k + ":p"}},
          json{
              {"amount", in["amount"]}, {"currency", in["currency"]}, {"customer", in["traveller"]}}
              .dump(),
          "application/json");
    });
    auto clients = Connected(c, sagad.port(), "/healthz", 60);
    Result graph = Drive(n, c, [&](int t, int) {
      auto res =
          clients[t]->Post("/v1/sagas/trip_booking/instances?wait=30", body, "application/json");
      if (!res || res->body.find("\"AWAITING_APPROVAL\"") == std::string::npos) ++failures;
    });
    std::cout << std::fixed << std::setprecision(1) << std::setw(6) << c << std::setw(14) << one.p50
              << std::setw(16) << sequential.p50 << std::setw(12) << graph.p50 << std::setw(12)
              << graph.p99 << std::setw(10) << graph.per_sec << std::setprecision(2)
              << graph.p50 / one.p50 << "  (sequential / one booking: " << sequential.p50 / one.p50
              << ")\n";
  }
  json e = downstream.Effects();
  std::cout << "failures " << failures << ", duplicates " << e["duplicates"] << "\n";
  return failures == 0 && e["duplicates"] == 0 ? 0 : 1;
}

}  // namespace

// Listing on PostgreSQL with many finished instances: the time of
// GET /v1/instances?status=NEEDS_REVIEW (and ?waiting=review) on an empty
// store, then with n finished instances (plus the same 20 under review).
double MedianMs(int port, const std::string& path) {
  std::vector<double> ms;
  for (int i = 0; i < 21; ++i) {
    auto t = Clock::now();
    Reply r = Http(port, "GET", path);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    if (r.status != 200) return -1;
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int PgListMode(Downstream& downstream, const std::string& data, int64_t n) {
  std::string uri = PostgresServer::Shared().NewDatabase();
  Coordinator sagad(downstream, data + "-unused");
  sagad.Configure({{"store", uri}});
  if (sagad.Start() < 0) return 1;
  // 20 real instances (they wait for approval), then marked NEEDS_REVIEW in
  // the table directly: the listing reads only the indexed columns.
  for (int i = 0; i < 20; ++i) sagad.Submit("incident_response", IncidentInput());
  PGconn* c = PQconnectdb(uri.c_str());
  auto exec = [&](const std::string& sql) {
    PGresult* r = PQexec(c, sql.c_str());
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok) std::cerr << PQerrorMessage(c);
    PQclear(r);
    return ok;
  };
  exec("UPDATE sagad_instances SET status = 'NEEDS_REVIEW', waiting = 'review'");
  const std::string q1 = "/v1/instances?status=NEEDS_REVIEW&limit=50",
                    q2 = "/v1/instances?waiting=review&limit=50";
  double e1 = MedianMs(sagad.port(), q1), e2 = MedianMs(sagad.port(), q2);
  auto t0 = Clock::now();
  std::string snap =
      json{{"status", "COMPLETED"}, {"saga", "order_fulfilment"}, {"pad", std::string(3000, 'x')}}
          .dump();
  if (!exec("INSERT INTO sagad_instances (id, saga, status, waiting, version, finished, snapshot) "
            "SELECT '000000000000-' || lpad(to_hex(g), 16, '0'), 'order_fulfilment', "
            "'COMPLETED', NULL, 4, true, '" +
            snap + "' FROM generate_series(1, " + std::to_string(n) + ") g") ||
      !exec("ANALYZE sagad_instances"))
    return 1;
  PQfinish(c);
  double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
  double f1 = MedianMs(sagad.port(), q1), f2 = MedianMs(sagad.port(), q2);
  std::cout << "PostgreSQL listing, median of 21 (ms): empty store / with " << n
            << " finished instances (inserted in " << std::setprecision(3) << load_s << " s)\n"
            << "  ?status=NEEDS_REVIEW  " << e1 << " / " << f1 << "  ratio " << f1 / e1 << "\n"
            << "  ?waiting=review       " << e2 << " / " << f2 << "  ratio " << f2 / e2 << "\n";
  return f1 > 0 && f2 > 0 ? 0 : 1;
}

// Retention soak: sagas at concurrency 64 with a retention period, and
// beside them 4 agents each opening a soc_tools run, making one call and
// finishing it, over and over; the data file and sagad's RSS printed every
// tenth of the run (n sagas), or every 5 minutes for `minutes` (then n is
// ignored). They should stay flat once the first period has passed: LMDB
// reuses freed pages, and nothing of a finished saga or run stays in memory.
int SoakMode(Coordinator& sagad, const std::string& data, int64_t n, int64_t retention_ms,
             int minutes) {
  sagad.Terminate();
  sagad.Configure({{"retention", {{"finished_after_ms", retention_ms}}}});
  if (sagad.Start() < 0) return 1;
  const std::string body = json{{"input", OrderInput()}}.dump();
  auto clients = Connected(64, sagad.port(), "/healthz", 60);
  std::atomic<int64_t> failures{0}, runs{0}, run_failures{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> agents;
  for (int a = 0; a < 4; ++a)
    agents.emplace_back([&, a] {
      httplib::Client c("127.0.0.1", sagad.port());
      c.set_keep_alive(true);
      c.set_read_timeout(60, 0);
      for (int64_t i = 0; !stop; ++i) {
        auto opened = c.Post("/v1/toolboxes/soc_tools/runs",
                             json{{"input", {{"incident", "INC-" + std::to_string(a)}}}}.dump(),
                             "application/json");
        const std::string id =
            opened ? json::parse(opened->body, nullptr, false).value("id", "") : "";
        bool ok = !id.empty();
        if (ok) {
          auto call = c.Post("/v1/instances/" + id + "/calls?wait=10",
                             json{{"call_id", "block"},
                                  {"tool", "block_ip"},
                                  {"arguments", {{"ip", "203.0.113.7"}}}}
                                 .dump(),
                             "application/json");
          auto finished = c.Post("/v1/instances/" + id + "/finish", "{}", "application/json");
          ok = call && call->status < 300 && finished && finished->status == 200;
        }
        if (ok)
          ++runs;
        else
          ++run_failures;
      }
    });
  auto t0 = Clock::now();
  auto elapsed_s = [&] {
    return std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - t0).count();
  };
  std::cout << "retention soak: "
            << (minutes > 0 ? std::to_string(minutes) + " minutes" : std::to_string(n) + " sagas")
            << ", finished_after_ms " << retention_ms << ", 4 agents' runs beside\n"
            << "sagas      runs      seconds  data.mdb MB  sagad RSS\n";
  const int64_t step = minutes > 0 ? 5000 : std::max<int64_t>(1, n / 10);
  int64_t next_report_s = 300;
  for (int64_t done = 0; minutes > 0 ? elapsed_s() < minutes * 60 : done < n;) {
    const int64_t batch = minutes > 0 ? step : std::min(step, n - done);
    Drive(static_cast<int>(batch), 64, [&](int t, int) {
      auto res = clients[t]->Post("/v1/sagas/order_fulfilment/instances?wait=30", body,
                                  "application/json");
      if (!res || res->status != 200) ++failures;
    });
    done += batch;
    if (minutes > 0 && elapsed_s() < next_report_s && elapsed_s() < minutes * 60) continue;
    next_report_s += 300;
    struct stat st {};
    stat((data + "/data.mdb").c_str(), &st);
    std::cout << std::left << std::setw(11) << done << std::setw(10) << runs.load() << std::setw(9)
              << elapsed_s() << std::setw(13) << st.st_size / (1 << 20)
              << Rss(sagad.process().pid()) << "\n"
              << std::flush;
  }
  stop = true;
  for (auto& t : agents) t.join();
  std::cout << "failures: " << failures << " sagas, " << run_failures << " runs\n";
  return failures == 0 && run_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  // workers: sagad's default unless --workers says otherwise (the test
  // harness's own default is 8).
  int sagas = 2000, recovery = 0;
  int workers = sagad::DefaultWorkers();
  int api_threads = 0;  // 0: sagad's default
  int64_t preload = 0;
  std::string store;  // "postgres" (a server of the bench's own) or a postgresql:// URI
  int64_t pg_list = 0, soak = 0, retention_ms = 60000;
  int soak_minutes = 0;
  int graph = 0;
  bool keyed = false;
  std::vector<int> levels;
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--keyed") {
      keyed = true;
      --i;  // a flag: no value
      continue;
    }
    if (i + 1 >= argc) a = "--usage";
    std::string v = a == "--usage" ? "" : argv[i + 1];
    if (a == "--sagas")
      sagas = std::stoi(v);
    else if (a == "--workers")
      workers = std::stoi(v);
    else if (a == "--api-threads")
      api_threads = std::stoi(v);
    else if (a == "--preload")
      preload = std::stoll(v);
    else if (a == "--recovery")
      recovery = std::stoi(v);
    else if (a == "--store")
      store = v;
    else if (a == "--pg-list")
      pg_list = std::stoll(v);
    else if (a == "--soak")
      soak = std::stoll(v);
    else if (a == "--soak-minutes")
      soak_minutes = std::stoi(v);
    else if (a == "--retention-ms")
      retention_ms = std::stoll(v);
    else if (a == "--graph")
      graph = std::stoi(v);
    else if (a == "--levels") {
      std::stringstream ss(v);
      for (std::string x; std::getline(ss, x, ',');) levels.push_back(std::stoi(x));
    } else {
      std::cerr
          << "usage: load_bench [--sagas N] [--levels 1,16,64] [--workers W] [--api-threads T] "
             "[--keyed] "
             "[--preload N | --recovery N | --store postgres|postgresql://... | --pg-list N |\n"
             " --soak N | --soak-minutes M [--retention-ms MS] | --graph N]\n";
      return 2;
    }
  }
  if (levels.empty()) levels = preload > 0 ? std::vector<int>{64} : std::vector<int>{1, 16, 64};
  TempDir dir;
  const std::string data = dir.path() + "/data";
  Downstream downstream;
  Coordinator sagad(downstream, data);
  sagad.Configure({{"workers", workers}});
  if (api_threads > 0) sagad.Configure({{"api", {{"threads", api_threads}}}});
  if (sagad.Start() < 0) return 1;
  std::cout << "order_fulfilment (3 steps, fsync on), " << std::thread::hardware_concurrency()
            << " cores, sagad workers " << workers << ", threads " << Threads(sagad.process().pid())
            << "\n";
  std::cout << "sagad idle: " << Rss(sagad.process().pid()) << "\n";
  if (recovery > 0) return RecoveryMode(downstream, sagad, recovery);
  if (graph > 0) return GraphMode(downstream, sagad, graph);
  if (pg_list > 0) return PgListMode(downstream, data, pg_list);
  if (soak > 0 || soak_minutes > 0) return SoakMode(sagad, data, soak, retention_ms, soak_minutes);
  Bench b{downstream, sagad, sagas};
  b.keyed = keyed;
  if (keyed) std::cout << "keyed clients: an Idempotency-Key per submission, a third replayed\n";
  b.Header();
  std::vector<std::pair<double, double>> empty;
  // Store-size mode compares two runs minutes apart on a shared machine: the
  // best of `repeat` runs per level on each side damps the noise.
  const int repeat = preload > 0 ? 2 : 1;
  for (int c : levels) {
    std::pair<double, double> best{0, 0};
    for (int r = 0; r < repeat; ++r) best = std::max(best, b.Level(c));
    empty.push_back(best);
  }
  std::cout << "sagad after " << b.total << " sagas: " << Rss(sagad.process().pid()) << "\n";
  if (preload > 0) {
    sagad.Terminate();
    auto t0 = Clock::now();
    if (!Preload(data, preload)) {
      std::cerr << "preload failed\n";
      return 1;
    }
    struct stat st {};
    stat((data + "/data.mdb").c_str(), &st);
    std::cout << "preloaded " << preload << " finished instances in "
              << std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - t0).count()
              << " s; data.mdb " << st.st_size / (1 << 20) << " MB\n";
    if (sagad.Start() < 0) return 1;
    std::cout << "sagad idle: " << Rss(sagad.process().pid()) << "\n";
    b.Header();
    for (size_t i = 0; i < levels.size(); ++i) {
      std::pair<double, double> r{0, 0};
      for (int k = 0; k < repeat; ++k) r = std::max(r, b.Level(levels[i]));
      std::cout << std::setprecision(3) << "  with " << preload
                << " stored / empty store: " << r.first / empty[i].first
                << " (ratio to the same-row baseline: " << r.second / empty[i].second << ")\n";
    }
    std::cout << "sagad after: " << Rss(sagad.process().pid()) << "\n";
  }
  if (!store.empty()) {
    // The same levels on PostgreSQL, in the same run, then two coordinators
    // sharing the database.
    std::string uri = store == "postgres" ? PostgresServer::Shared().NewDatabase() : store;
    Coordinator pg(downstream, dir.path() + "/unused-pg");
    pg.Configure({{"workers", workers}, {"store", uri}, {"coordinator_id", "bench-pg-a"}});
    if (pg.Start() < 0) return 1;
    std::cout << "PostgreSQL store (synchronous_commit=on):\n";
    Bench p{downstream, pg, sagas};
    p.keyed = keyed;
    p.Header();
    for (size_t i = 0; i < levels.size(); ++i) {
      auto r = p.Level(levels[i]);
      std::cout << std::setprecision(3) << "  PostgreSQL / LMDB: " << r.first / empty[i].first
                << " (ratio to the same-row baseline: " << r.second / empty[i].second << ")\n";
    }
    Coordinator pg2(downstream, dir.path() + "/unused-pg2");
    pg2.Configure({{"workers", workers}, {"store", uri}, {"coordinator_id", "bench-pg-b"}});
    if (pg2.Start() < 0) return 1;
    std::cout << "two coordinators on one PostgreSQL (clients alternate):\n";
    p.second = &pg2;
    p.Header();
    p.Level(levels.back());
    b.total += p.total;
    b.ok = b.ok && p.ok;
  }
  bool effects_ok = b.EffectsOk(0);
  return b.ok && effects_ok ? 0 : 1;
}
