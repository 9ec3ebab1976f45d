// A third-party REST API with no operations endpoint, made effectively-once
// by a step's reconcile read (docs/defining-sagas.md, "reconcile"): a real
// sagad, a real HTTP downstream on loopback that answers after sagad's
// timeout, so the outcome is unclear; the read decides whether to re-send.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "coordinator/http/http_message.h"
#include "tests/testing/cluster.h"
#include "tests/testing/rogue_downstream.h"

namespace sagad::testing {
namespace {

using json = nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// POST /charges {"order"}: charges the order, then answers 1.5 s later
// (sagad gave up at 0.5 s); an order named "slow-nothing" is not charged the
// first time (the request is dropped after the wait). GET
// /charges/search/{order}: {"data": [the charge]} or {"data": []}.
class ChargesApi {
 public:
  ChargesApi() : server_([this](const RawRequest& r) { return Answer(r); }) {}
  std::string url() const { return server_.url(); }
  int Charged(const std::string& order) {
    std::lock_guard<std::mutex> l(mu_);
    return charges_.count(order) ? charges_[order] : 0;
  }
  // Requests as they arrived (the server records one when it is answered).
  int Posts() { return Seen("POST /charges"); }
  int Searches() { return Seen("GET /charges/search"); }
  int OperationQuestions() { return Seen("GET /operations"); }
  int ReadsWithAKey() { return Seen("a read with a key"); }

 private:
  int Seen(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    return seen_[what];
  }

  RawReply Answer(const RawRequest& r) {
    {
      std::lock_guard<std::mutex> l(mu_);
      const std::string path = r.path.substr(0, r.path.find('/', 1));
      ++seen_[r.method + " " +
              (r.path.rfind("/charges/search/", 0) == 0 ? "/charges/search" : path)];
      if (r.method == "GET" && r.head.find("Idempotency-Key:") != std::string::npos)
        ++seen_["a read with a key"];
    }
    if (r.method == "GET" && r.path.rfind("/charges/search/", 0) == 0) {
      const std::string order = PercentDecode(r.path.substr(16), false);
      std::lock_guard<std::mutex> l(mu_);
      json data = json::array();
      if (charges_.count(order)) data.push_back({{"id", "ch-" + order}, {"order", order}});
      return RawAnswer(200, json{{"data", data}}.dump());
    }
    if (r.method == "POST" && r.path == "/charges") {
      const std::string order = json::parse(r.body).value("order", "");
      bool late = false;  // the first request of a slow order is answered late
      {
        std::lock_guard<std::mutex> l(mu_);
        const bool drop = order == "slow-nothing" && !dropped_.count(order);
        if (drop)
          dropped_.insert(order);
        else
          ++charges_[order];
        late = order.rfind("slow", 0) == 0 && (drop || charges_[order] == 1) &&
               !(order == "slow-nothing" && !drop);
      }
      if (late) std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past the timeout
      return RawAnswer(201, json{{"id", "ch-" + order}}.dump());
    }
    return RawAnswer(404, "{}");
  }

  std::mutex mu_;
  std::map<std::string, int> charges_;
  std::set<std::string> dropped_;
  std::map<std::string, int> seen_;
  RogueDownstream server_;  // last: its threads call Answer
};

TEST(RestReconcileTest, AnUnclearChargeIsFoundByTheReadAndNeverSentTwice) {
  signal(SIGPIPE, SIG_IGN);  // a late answer is written to a connection sagad closed
  TempDir dir;
  Downstream downstream;
  ChargesApi api;
  json services = {
      {"payments",
       {{"base_url", api.url()},
        {"timeout_ms", 500},
        {"queryable", false},
        {"idempotent", false},
        {"retry",
         {{"initial_backoff_ms", 20}, {"max_backoff_ms", 50}, {"max_reconciliations", 5}}}}}};
  const std::string defs = dir.path() + "/defs";
  ASSERT_EQ(mkdir(defs.c_str(), 0755), 0);
  std::ofstream(defs + "/charge.json") << json::parse(R"({
    "name": "rest_charge", "input": ["order"],
    "steps": [{"name": "charge",
               "forward": {"service": "payments", "method": "POST", "path": "/charges",
                           "body": {"order": "{{input.order}}"}},
               "compensation": {"service": "payments", "method": "POST", "path": "/refunds"},
               "reconcile": {"method": "GET", "path": "/charges/search/{{input.order}}",
                             "committed_if": "/data/0"}}]})")
                                              .dump();
  Coordinator c(downstream, dir.path() + "/data", services);
  c.AddArgs({"--definitions", defs});
  c.LogTo(dir.path() + "/sagad.log");
  ASSERT_GT(c.Start(), 0) << ReadFile(dir.path() + "/sagad.log");

  // The charge happened; its answer came too late: the read finds it.
  Reply r = c.Submit("rest_charge", {{"order", "slow-charged"}});
  ASSERT_EQ(r.status, 201) << r.raw;
  json done = c.WaitStatus(r.body["id"], "COMPLETED");
  ASSERT_EQ(done["status"], "COMPLETED") << done.dump();
  EXPECT_EQ(done["steps"][0]["result"]["data"][0]["id"], "ch-slow-charged");
  EXPECT_EQ(api.Charged("slow-charged"), 1);

  // Nothing happened, and nobody said so in time: the read finds nothing,
  // and the charge is sent again, once.
  r = c.Submit("rest_charge", {{"order", "slow-nothing"}});
  ASSERT_EQ(r.status, 201) << r.raw;
  done = c.WaitStatus(r.body["id"], "COMPLETED");
  ASSERT_EQ(done["status"], "COMPLETED") << done.dump();
  EXPECT_EQ(api.Charged("slow-nothing"), 1);

  EXPECT_EQ(api.Posts(), 3);  // one per charge, and the one re-sent
  EXPECT_GE(api.Searches(), 2);
  EXPECT_EQ(api.OperationQuestions(), 0);  // the service has no such endpoint
  EXPECT_EQ(api.ReadsWithAKey(), 0);       // a read is not the operation
}

}  // namespace
}  // namespace sagad::testing
