// history_bench: the history at scale. For each size, on LMDB
// and (with --store postgres) on PostgreSQL:
//   - the first page of each documented filter, over HTTP, p50 and p99 of
//     --queries requests one after another: status=NEEDS_REVIEW,
//     waiting=review, saga=..., a declared search attribute
//     (input.customer), created_after (the newest minute), and a search on
//     an undeclared field (input.address: the bounded scan);
//   - submissions beside readers: 16 clients submitting order_fulfilment
//     (?wait) for --seconds alone, then again while 4 readers each ask the
//     slowest filter (the undeclared search) 100 ms after its answer; the
//     ratio of the two rates (same run);
//   - the restart at each size: sagad started on the filled store, to its
//     first /readyz 200.
// The history is filled between sizes through the store library itself
// (LmdbStore / PostgresStore::CreateInstanceAsync, sagad stopped): clones
// of a finished order that sagad wrote, each with its own id and creation
// time, customer c-(i mod 1000), and one in 10,000 in NEEDS_REVIEW; the
// store writes its indexes as for any creation.
//
//   history_bench [--sizes 10000,100000,1000000] [--store lmdb|postgres]
//                 [--queries 200] [--seconds 8]
// Build in Release first (BUILD_TYPE=Release scripts/build.sh).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <future>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <thread>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "coordinator/store/postgres/postgres_store.h"
#include "tests/testing/cluster.h"
#include "tests/testing/postgres.h"

using nlohmann::json;
using namespace sagad;
using namespace sagad::testing;
using Steady = std::chrono::steady_clock;

namespace {

struct Percentiles {
  double p50 = 0, p99 = 0;
};

Percentiles Of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return {};
  auto at = [&](double p) { return v[std::min(v.size() - 1, size_t(p * v.size()))]; };
  return {at(0.50), at(0.99)};
}

double Ms(Steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Writes instances [from, to) as clones of `tmpl` through the store's own
// asynchronous creation (indexes included), at most 4,000 in flight.
bool Fill(Store& store, const json& tmpl, int64_t from, int64_t to, int64_t t0) {
  std::mutex mu;
  std::condition_variable cv;
  int64_t in_flight = 0, failed = 0;
  for (int64_t i = from; i < to; ++i) {
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return in_flight < 4000; });
      ++in_flight;
    }
    char tail[24];
    std::snprintf(tail, sizeof tail, "-%016llx", static_cast<unsigned long long>(i));
    auto w = std::make_shared<CreationWrite>();
    w->snapshot = tmpl;
    const std::string id = IdFloor(t0 + i) + tail;
    w->snapshot["id"] = id;
    w->snapshot["created_at"] = t0 + i;
    w->snapshot["updated_at"] = t0 + i;
    w->snapshot["input"]["customer"] = "c-" + std::to_string(i % 1000);
    if (i % 10000 == 5000) {
      w->snapshot["status"] = "NEEDS_REVIEW";
      w->snapshot["waiting_for"] = "review";
      w->snapshot["review_reason"] = "bench";
    }
    Event e;
    e.seq = 1;
    e.type = "instance_created";
    e.at_ms = t0 + i;
    e.data = {{"id", id}, {"saga", tmpl.value("saga", "")}, {"input", w->snapshot["input"]}};
    w->events.push_back(std::move(e));
    store.CreateInstanceAsync(w, [&](Status s) {
      std::lock_guard<std::mutex> l(mu);
      --in_flight;
      failed += !s.ok();
      if (!s.ok() && failed < 3) std::cerr << "fill: " << s.ToString() << "\n";
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return in_flight == 0; });
  return failed == 0;
}

StatusOr<StorePtr> OpenStore(const std::string& data_dir, const std::string& uri) {
  if (!uri.empty()) {
    auto s = PostgresStore::Open(uri, 8);
    if (!s.ok()) return s.status();
    return StorePtr(std::move(*s));
  }
  auto s = LmdbStore::Open(data_dir);
  if (!s.ok()) return s.status();
  return StorePtr(std::move(*s));
}

// Submits order_fulfilment from `clients` threads until `stop`; sagas done.
int64_t Submit(int port, int clients, double seconds) {
  std::atomic<int64_t> done{0};
  const std::string body = json{{"input", OrderInput()}}.dump();
  const auto until = Steady::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&] {
      httplib::Client c("127.0.0.1", port);
      c.set_keep_alive(true);
      c.set_read_timeout(60, 0);
      while (Steady::now() < until) {
        auto r = c.Post("/v1/sagas/order_fulfilment/instances?wait=30", body, "application/json");
        if (r && r->status == 200) ++done;
      }
    });
  for (auto& t : threads) t.join();
  return done.load();
}

struct Run {
  int port;
  int queries;
  double seconds;
  int64_t newest_ms;

  void Filters(int64_t size) {
    const std::vector<std::pair<std::string, std::string>> filters = {
        {"status=NEEDS_REVIEW", "/v1/instances?status=NEEDS_REVIEW"},
        {"waiting=review", "/v1/instances?waiting=review"},
        {"saga=order_fulfilment", "/v1/instances?saga=order_fulfilment"},
        {"input.customer (declared)", "/v1/instances?input.customer=c-7"},
        {"created_after (last minute)",
         "/v1/instances?created_after=" + std::to_string(newest_ms - 60000)},
        {"input.address (undeclared)", "/v1/instances?input.address=nowhere"}};
    httplib::Client c("127.0.0.1", port);
    c.set_keep_alive(true);
    c.set_read_timeout(60, 0);
    for (const auto& [name, path] : filters) {
      std::vector<double> ms;
      size_t found = 0;
      bool indexed = false;
      for (int q = 0; q < queries; ++q) {
        auto t = Steady::now();
        auto r = c.Get(path);
        ms.push_back(Ms(Steady::now() - t));
        if (q == 0 && r && r->status == 200) {
          json j = json::parse(r->body, nullptr, false);
          found = j.value("instances", json::array()).size();
          indexed = j.value("indexed", false);
        }
      }
      Percentiles p = Of(ms);
      std::cout << "  " << std::left << std::setw(10) << size << std::setw(30) << name << std::fixed
                << std::setprecision(2) << std::setw(10) << p.p50 << std::setw(10) << p.p99
                << std::setw(8) << found << (indexed ? "indexed" : "bounded scan") << "\n";
    }
  }

  void ReadersBesideWriters() {
    const double alone = Submit(port, 16, seconds) / seconds;
    std::atomic<bool> stop{false};
    std::atomic<int64_t> reads{0};
    std::vector<std::thread> readers;
    for (int k = 0; k < 4; ++k)
      readers.emplace_back([&] {
        httplib::Client c("127.0.0.1", port);
        c.set_keep_alive(true);
        c.set_read_timeout(60, 0);
        while (!stop) {
          if (auto r = c.Get("/v1/instances?input.address=nowhere"); r && r->status == 200) ++reads;
          std::this_thread::sleep_for(std::chrono::milliseconds(100));  // paced, by design
        }
      });
    const double beside = Submit(port, 16, seconds) / seconds;
    stop = true;
    for (auto& t : readers) t.join();
    std::cout << std::fixed << std::setprecision(1) << "  submissions alone " << alone
              << "/s, beside 4 readers " << beside << "/s (" << reads.load() << " reads): ratio "
              << std::setprecision(2) << beside / alone << "\n";
  }
};

int Main(const std::vector<int64_t>& sizes, bool postgres, int queries, double seconds) {
  TempDir dir;
  Downstream downstream;
  std::unique_ptr<PostgresServer> pg;
  std::string uri;
  if (postgres) {
    pg = std::make_unique<PostgresServer>();
    uri = pg->NewDatabase();
  }
  Coordinator sagad(downstream, dir.path() + "/data");
  sagad.Configure({{"workers", 2}});
  if (postgres) sagad.Configure({{"store", uri}});
  if (const char* log = std::getenv("HISTORY_BENCH_LOG")) sagad.LogTo(log);  // sagad's log
  if (sagad.Start() < 0) return 1;
  // The template: a finished order as sagad wrote it.
  Reply first = sagad.Submit("order_fulfilment", OrderInput(), 10);
  if (first.body.value("status", "") != "COMPLETED") {
    std::cerr << "the first order did not complete: " << first.raw << "\n";
    return 1;
  }
  const std::string first_id = first.body["id"];
  sagad.Terminate();
  int64_t stored = 0;
  // The clones are older than the template: one a millisecond, from t0.
  const int64_t t0 = CreatedAtOfId(first_id) - 10000000;
  std::cout << "history_bench on " << (postgres ? "PostgreSQL" : "LMDB") << "\n"
            << "  " << std::left << std::setw(10) << "stored" << std::setw(30) << "filter"
            << std::setw(10) << "p50 ms" << std::setw(10) << "p99 ms" << std::setw(8) << "page"
            << "answered by\n";
  for (int64_t size : sizes) {
    {
      auto store = OpenStore(dir.path() + "/data", uri);
      if (!store.ok()) {
        std::cerr << store.status().ToString() << "\n";
        return 1;
      }
      auto tmpl = (*store)->GetInstance(first_id);
      if (!tmpl.ok()) return 1;
      auto t = Steady::now();
      if (!Fill(**store, *tmpl, stored, size, t0)) return 1;
      std::cerr << "filled " << stored << " -> " << size << " in " << Ms(Steady::now() - t) / 1000
                << " s\n";
      stored = size;
    }
    // The restart at this size: from the start to /readyz's 200, right
    // after the fill (the database may still be writing it out), and again
    // after the queries.
    auto restart = [&](const char* what) {
      const auto started = Steady::now();
      if (sagad.Start() < 0) return false;
      if (!WaitFor([&] { return Http(sagad.port(), "GET", "/readyz").status == 200; },
                   std::chrono::seconds(120)))
        return false;
      std::cout << "  " << std::left << std::setw(10) << size << what << " "
                << static_cast<int64_t>(Ms(Steady::now() - started)) << " ms\n";
      return true;
    };
    if (!restart("restart to /readyz")) return 1;
    Run run{sagad.port(), queries, seconds, t0 + size};
    run.Filters(size);
    run.ReadersBesideWriters();
    sagad.Terminate();
    if (!restart("restart to /readyz, again")) return 1;
    sagad.Terminate();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes = {10000, 100000, 1000000};
  bool postgres = false;
  int queries = 200;
  double seconds = 8;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--sizes") {
      sizes.clear();
      for (size_t p = 0; p < v.size();) {
        size_t comma = v.find(',', p);
        sizes.push_back(std::stoll(v.substr(p, comma - p)));
        p = comma == std::string::npos ? v.size() : comma + 1;
      }
      ++i;
    } else if (a == "--store") {
      postgres = v == "postgres";
      ++i;
    } else if (a == "--queries") {
      queries = std::stoi(v);
      ++i;
    } else if (a == "--seconds") {
      seconds = std::stod(v);
      ++i;
    } else {
      std::cerr << "usage: history_bench [--sizes N,N,...] [--store lmdb|postgres] "
                   "[--queries Q] [--seconds S]\n";
      return 2;
    }
  }
  return Main(sizes, postgres, queries, seconds);
}
