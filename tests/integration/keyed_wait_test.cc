// Clients that submit the way the README shows, several at once: keep-alive
// connections, an Idempotency-Key per submission, ?wait. Every answer must
// come (COMPLETED), every replay must name the first instance, /healthz must
// answer throughout and SIGTERM must end the process. Run on LMDB and again
// with SAGAD_TEST_STORE=postgres.
//
// The hang this guards against: the commit that settled an instance woke its
// waiting submission on the store's committer thread, which then stored the
// submission's response with a blocking commit that only the committer
// itself could write.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

using nlohmann::json;

struct Answer {
  int status = 0;
  std::string id, saga_status, replayed;
  std::string errors;  // the steps' last errors, when it did not complete
};

// One keep-alive client: its connection is reused between requests.
class KeepAliveClient {
 public:
  explicit KeepAliveClient(int port) : cli_("127.0.0.1", port) {
    cli_.set_keep_alive(true);
    cli_.set_read_timeout(30, 0);  // ?wait=20, and some slack
  }
  Answer Submit(const std::string& key, const json& input) {
    httplib::Headers h = {{"Idempotency-Key", key}};
    auto res = cli_.Post("/v1/sagas/order_fulfilment/instances?wait=20", h,
                         json{{"input", input}}.dump(), "application/json");
    Answer a;
    if (!res) return a;
    a.status = res->status;
    json body = json::parse(res->body, nullptr, false);
    if (res->status >= 300) {  // a problem+json body ("status" is a number there)
      a.errors = res->body;
    } else if (body.is_object()) {
      a.id = body.value("id", "");
      a.saga_status = body.value("status", "");
      if (a.saga_status != "COMPLETED" && body.contains("steps"))
        for (const auto& s : body["steps"])
          if (!s.value("last_error", "").empty())
            a.errors += s.value("name", "") + ": " + s.value("last_error", "") + "; ";
    }
    a.replayed = res->get_header_value("Idempotent-Replayed");
    return a;
  }

 private:
  httplib::Client cli_;
};

void KeyedWaitingClients(int clients, int each) {
  TempDir dir;
  Downstream downstream;
  // Time enough for a loaded machine under a sanitizer (the test is about
  // answers, not speed): a call cut off at 1 s is re-sent and may run out
  // of attempts, turning a saga back.
  json slow_ok = {{"timeout_ms", 15000}};
  Coordinator sagad(downstream, dir.path() + "/data",
                    {{"inventory", slow_ok}, {"payments", slow_ok}, {"shipping", slow_ok}});
  ASSERT_GT(sagad.Start(), 0);
  const int port = sagad.port();

  // /healthz is asked throughout; every answer must come within 2 s.
  std::atomic<bool> done{false};
  std::atomic<int> slow_health{0}, health_checks{0};
  std::thread health([&] {
    httplib::Client cli("127.0.0.1", port);
    cli.set_read_timeout(2, 0);
    while (!done) {
      auto res = cli.Get("/healthz");
      ++health_checks;
      if (!res || res->status != 200) ++slow_health;
      std::this_thread::yield();
    }
  });

  std::vector<std::vector<Answer>> first(clients), replays(clients);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      KeepAliveClient cli(port);
      for (int i = 0; i < each; ++i) {
        json input = OrderInput();
        input["customer"] = "c-" + std::to_string(c) + "-" + std::to_string(i);
        first[c].push_back(cli.Submit("key-" + std::to_string(c) + "-" + std::to_string(i), input));
        if (first[c].back().status == 0) return;  // never answered: the test fails fast
      }
      for (int i = 0; i < each; i += 3) {  // a third of them again
        json input = OrderInput();
        input["customer"] = "c-" + std::to_string(c) + "-" + std::to_string(i);
        replays[c].push_back(
            cli.Submit("key-" + std::to_string(c) + "-" + std::to_string(i), input));
      }
    });
  for (auto& t : threads) t.join();
  done = true;
  health.join();

  for (int c = 0; c < clients; ++c) {
    ASSERT_EQ(first[c].size(), size_t(each))
        << "client " << c << " gave up: a submission never answered";
    for (int i = 0; i < each; ++i) {
      const Answer& a = first[c][i];
      EXPECT_EQ(a.status, 200) << "client " << c << " submission " << i << ": " << a.errors;
      EXPECT_EQ(a.saga_status, "COMPLETED")
          << "client " << c << " submission " << i << ": " << a.errors;
    }
    for (size_t r = 0; r < replays[c].size(); ++r) {
      const Answer& a = replays[c][r];
      EXPECT_EQ(a.status, 200) << "client " << c << " replay " << r;
      EXPECT_EQ(a.id, first[c][r * 3].id) << "client " << c << " replay " << r;
      EXPECT_EQ(a.replayed, "true") << "client " << c << " replay " << r;
    }
  }
  EXPECT_GT(health_checks.load(), 0);
  EXPECT_EQ(slow_health.load(), 0) << "/healthz failed or took over 2 s";
  EXPECT_EQ(RepeatedEffects(downstream), "");
  // SIGTERM ends it (Terminate waits 20 s at most: -1 when it did not).
  sagad.process().Kill(SIGTERM);
  EXPECT_EQ(sagad.process().Wait(std::chrono::seconds(10)), 0) << "SIGTERM did not end sagad";
}

TEST(KeyedWaitTest, SixteenKeepAliveClientsWithKeysAndWaitAreAllAnswered) {
  KeyedWaitingClients(16, 10);
}

TEST(KeyedWaitTest, SixtyFourKeepAliveClientsWithKeysAndWaitAreAllAnswered) {
  KeyedWaitingClients(64, 10);
}

}  // namespace
}  // namespace sagad::testing
