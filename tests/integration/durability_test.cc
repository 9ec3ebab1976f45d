// Write-ahead, observed from outside: a downstream in this test process reads
// sagad's LMDB data dir at the moment each request arrives. Every step's
// STARTED record (and the outcome of every earlier step) must already be
// committed, whatever batching the group commit or the engine does; and an
// instance reported COMPLETED must be COMPLETED in the store.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

class DurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    // Enough threads that no request waits in a queue behind idle
    // keep-alive connections (a late request would not be this test's point).
    server_.new_task_queue = [] { return new httplib::ThreadPool(64); };
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      std::string key = req.get_header_value("Idempotency-Key");
      Check(req.get_header_value("Saga-Instance"), key);
      std::lock_guard<std::mutex> l(mu_);
      auto [it, fresh] = refs_.emplace(key, "R-" + std::to_string(refs_.size() + 1));
      res.status = fresh ? 201 : 200;
      res.set_content(nlohmann::json{{"id", it->second}}.dump(), "application/json");
    });
    server_.Get("/operations/(.*)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(mu_);
      auto it = refs_.find(req.matches[1]);
      res.status = it == refs_.end() ? 404 : 200;
      if (it != refs_.end())
        res.set_content(nlohmann::json{{"status", "committed"}, {"id", it->second}}.dump(),
                        "application/json");
    });
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    std::string url = "http://127.0.0.1:" + std::to_string(port_);
    nlohmann::json here = {{"base_url", url}, {"timeout_ms", 10000}};
    coordinator_ = std::make_unique<Coordinator>(
        unused_, dir_.path() + "/data",
        nlohmann::json{{"inventory", here}, {"payments", here}, {"shipping", here}});
    coordinator_->Configure({{"workers", 16}});
    ASSERT_GT(coordinator_->Start(), 0);
    auto store = LmdbStore::Open(dir_.path() + "/data");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  void TearDown() override {
    coordinator_.reset();  // closes its keep-alive connections to server_
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  // Called as a request arrives: what must already be durable.
  void Check(const std::string& id, const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    if (!store_) return;
    auto events = store_->GetEvents(id);
    if (!events.ok()) {
      violations_.push_back(key + ": no event log yet");
      return;
    }
    std::string step = key.substr(key.rfind(':') + 1);
    bool started = false;
    std::set<std::string> committed;
    std::vector<std::string> started_steps;
    for (const Event& e : *events) {
      if (e.type == "started") started_steps.push_back(e.step);
      if (e.type == "started" && e.data.value("key", "") == key) started = true;
      if (e.type == "committed") committed.insert(e.step);
    }
    if (!started) violations_.push_back(key + ": request arrived before its STARTED record");
    for (const auto& s : started_steps)
      if (s != step && !committed.count(s))
        violations_.push_back(key + ": arrived before the outcome of '" + s + "' was recorded");
    ++checked_;
  }

  TempDir dir_;
  Downstream unused_;  // the other services of the config point here
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
  std::unique_ptr<Coordinator> coordinator_;
  std::mutex mu_;
  std::unique_ptr<LmdbStore> store_;
  std::vector<std::string> violations_;
  int checked_ = 0;
  std::map<std::string, std::string> refs_;  // idempotency key -> ref
};

TEST_F(DurabilityTest, EveryRequestLeavesAfterItsStartedRecordAndEveryEarlierOutcome) {
  constexpr int kSagas = 40;
  std::vector<std::thread> clients;
  std::atomic<int> completed{0};
  std::vector<std::string> ids(kSagas);
  for (int t = 0; t < 8; ++t)
    clients.emplace_back([&, t] {
      for (int i = t; i < kSagas; i += 8) {
        Reply r = coordinator_->Submit("order_fulfilment", OrderInput(), 20);
        if (r.status == 200 && r.body["status"] == "COMPLETED") {
          ++completed;
          ids[i] = r.body["id"];
          // Acknowledged as COMPLETED: the store says so too.
          auto snap = store_->GetInstance(ids[i]);
          std::lock_guard<std::mutex> l(mu_);
          if (!snap.ok() || (*snap)["status"] != "COMPLETED")
            violations_.push_back(ids[i] + ": reported COMPLETED before the store had it");
        }
      }
    });
  for (auto& c : clients) c.join();
  EXPECT_EQ(completed, kSagas);
  std::lock_guard<std::mutex> l(mu_);
  EXPECT_EQ(checked_, 3 * kSagas);
  EXPECT_EQ(refs_.size(), 3u * kSagas);
  EXPECT_TRUE(violations_.empty())
      << violations_.size() << " violations, first: " << violations_[0];
}

}  // namespace
}  // namespace sagad::testing
