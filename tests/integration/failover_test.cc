// The database's failover under load (label failover): a primary and a
// synchronous standby (streaming replication), sagad on a URI naming both,
// clients submitting with keys and ?wait to services that do not
// deduplicate; the primary is SIGKILLed (every process of it, as its host
// dying) and the standby promoted. Whatever was in flight when it died —
// a commit whose answer never came included — must end with 0 duplicate
// effects, 0 lost instances, every acknowledged submission present and
// every instance finished. The time from the kill to the first commit on
// the new primary is reported.
//
// SAGAD_FAILOVER_KILL_AFTER (default 40) sets how many submissions are
// acknowledged before the kill: run it with several values.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "tests/testing/cluster.h"
#include "tests/testing/netns.h"
#include "tests/testing/postgres.h"
#include "tests/testing/tcp_proxy.h"

namespace sagad::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int KillAfter() {
  const char* v = std::getenv("SAGAD_FAILOVER_KILL_AFTER");
  return v && std::atoi(v) > 0 ? std::atoi(v) : 40;
}

// What a client learnt of one submission.
struct Submitted {
  std::string key, id, status;
};

// A client as a real one behaves: keep-alive, a key per submission, ?wait;
// an answer that does not say what became of the submission (no answer, a
// 503) is asked again with the same key until one does.
class Client {
 public:
  explicit Client(int port) : cli_("127.0.0.1", port) {
    cli_.set_keep_alive(true);
    cli_.set_read_timeout(30, 0);
    cli_.set_connection_timeout(2, 0);
  }
  Submitted Submit(const std::string& key, const json& input, Clock::time_point give_up) {
    Submitted out{key, "", ""};
    while (Clock::now() < give_up) {
      auto res =
          cli_.Post("/v1/sagas/order_fulfilment/instances?wait=20", {{"Idempotency-Key", key}},
                    json{{"input", input}}.dump(), "application/json");
      if (res && (res->status == 200 || res->status == 201 || res->status == 202)) {
        json body = json::parse(res->body, nullptr, false);
        out.id = body.value("id", "");
        out.status = body.value("status", "");
        return out;
      }
      // No answer or 503 (the store is failing over): the same key again,
      // a little later (a client's backoff, not a synchronisation).
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return out;
  }

 private:
  httplib::Client cli_;
};

TEST(FailoverTest, PrimaryKilledStandbyPromotedNothingLostNothingDoubled) {
  const int kill_after = KillAfter();
  const int kClients = 8, kEach = 15;
  PostgresServer primary(
      "wal_level = replica\nmax_wal_senders = 5\n"
      "synchronous_standby_names = 'sagad_standby'\n");
  // The standby must not wait for a standby of its own once promoted; it
  // retries its dead primary every 200 ms rather than 5 s (a promotion
  // waits for the retry in progress).
  PostgresServer standby("synchronous_standby_names = ''\nwal_retrieve_retry_interval = '200ms'\n",
                         &primary, "sagad_standby");
  ASSERT_TRUE(WaitFor(
      [&] {
        return primary.QueryValue("postgres",
                                  "SELECT sync_state FROM pg_stat_replication WHERE "
                                  "application_name = 'sagad_standby'") == "sync";
      },
      std::chrono::seconds(60)))
      << "the standby never became synchronous";
  const std::string primary_uri = primary.NewDatabase();
  const std::string db = primary_uri.substr(primary_uri.rfind('/') + 1);
  const std::string uri = "postgresql://postgres@127.0.0.1:" + std::to_string(primary.port()) +
                          ",127.0.0.1:" + std::to_string(standby.port()) + "/" + db;

  TempDir dir;
  Downstream downstream(/*dedup=*/false);
  json services = NonDeduplicating({"inventory", "payments", "shipping"});
  for (auto& [name, s] : services.items()) s["timeout_ms"] = 15000;
  Coordinator sagad(downstream, dir.path() + "/data", services);
  sagad.Configure({{"store", uri}});
  sagad.LogTo(dir.path() + "/sagad.log");
  ASSERT_GT(sagad.Start(), 0);
  const int port = sagad.port();

  std::mutex mu;
  std::vector<Submitted> answers;
  std::atomic<int> acknowledged{0};
  const auto give_up = Clock::now() + std::chrono::minutes(4);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&, c] {
      Client cli(port);
      for (int i = 0; i < kEach; ++i) {
        json input = OrderInput();
        input["customer"] = "c-" + std::to_string(c) + "-" + std::to_string(i);
        Submitted s =
            cli.Submit("fo-" + std::to_string(c) + "-" + std::to_string(i), input, give_up);
        if (!s.id.empty()) ++acknowledged;
        std::lock_guard<std::mutex> l(mu);
        answers.push_back(s);
      }
    });

  ASSERT_TRUE(WaitFor([&] { return acknowledged >= kill_after; }, std::chrono::seconds(120)))
      << "only " << acknowledged << " submissions acknowledged before the kill";
  const int64_t killed_at = WallMs();
  primary.Kill();
  const int64_t dead_at = WallMs();  // what it committed until now may be on the standby
  // No primary: not ready (the standby is read-only).
  EXPECT_TRUE(WaitFor([&] { return Http(port, "GET", "/readyz").status == 503; }))
      << "/readyz kept answering 200 with no primary";
  const int64_t promote_at = WallMs();
  standby.Promote();
  const int64_t promoted_at = WallMs();
  std::string first_commit;
  ASSERT_TRUE(WaitFor(
      [&] {
        first_commit = standby.QueryValue(
            db, "SELECT min(at) FROM sagad_batches WHERE answers IS NOT NULL AND at > " +
                    std::to_string(dead_at));
        return !first_commit.empty() && first_commit.rfind("error", 0) != 0;
      },
      std::chrono::seconds(120)))
      << "no commit on the new primary: " << first_commit;
  const int64_t first_at = std::atoll(first_commit.c_str());
  const int64_t to_first_commit = first_at - killed_at;
  std::cout << "[failover] killed after " << acknowledged << " acknowledged; first commit on the "
            << "new primary " << to_first_commit << " ms after the kill (/readyz 503 after "
            << promote_at - killed_at << " ms, pg_ctl promote took " << promoted_at - promote_at
            << " ms; the first commit came " << first_at - promoted_at
            << " ms after the promotion)\n";
  RecordProperty("kill_to_first_commit_ms", std::to_string(to_first_commit));
  EXPECT_TRUE(
      WaitFor([&] { return Http(port, "GET", "/readyz").status == 200; }, std::chrono::seconds(30)))
      << "/readyz never said ready again on the new primary";
  for (auto& t : clients) t.join();

  // Every submission was acknowledged (a client keeps asking until it is),
  // and its key names one instance, which finished.
  ASSERT_EQ(answers.size(), size_t(kClients * kEach));
  std::set<std::string> ids;
  for (const auto& a : answers) {
    ASSERT_FALSE(a.id.empty()) << a.key << " was never acknowledged";
    EXPECT_TRUE(ids.insert(a.id).second) << a.key << " shares instance " << a.id;
    json view = sagad.WaitStatus(a.id, "COMPLETED", std::chrono::seconds(60));
    EXPECT_EQ(view.value("status", ""), "COMPLETED") << a.key << " " << a.id << ": " << view.dump();
  }
  // A replay of every key names the same instance.
  Client again(port);
  for (size_t i = 0; i < answers.size(); i += 7) {
    json input = OrderInput();
    const std::string& key = answers[i].key;
    input["customer"] = "c-" + key.substr(3);
    EXPECT_EQ(again.Submit(key, input, Clock::now() + std::chrono::seconds(30)).id, answers[i].id)
        << key;
  }
  // No instance the clients were not told of: each was acknowledged.
  EXPECT_EQ(standby.QueryValue(db, "SELECT count(*) FROM sagad_instances"),
            std::to_string(ids.size()));
  EXPECT_EQ(RepeatedEffects(downstream), "");
  // What the kill caught in flight, from sagad's log.
  std::ifstream log(dir.path() + "/sagad.log");
  std::map<std::string, int> seen;
  for (std::string line; std::getline(log, line);)
    for (const char* what : {"reading its outcome back", "the batch was committed",
                             "the batch was not committed", "outcome of the batch is unknown"})
      if (line.find(what) != std::string::npos) ++seen[what];
  std::cout << "[failover] commits cut by the kill:";
  for (const auto& [what, n] : seen) std::cout << " " << what << " x" << n << ";";
  std::cout << "\n";
  sagad.process().Kill(SIGTERM);
  EXPECT_EQ(sagad.process().Wait(std::chrono::seconds(15)), 0);
}

// The primary goes silent without a reset (every byte held or
// dropped, connections left open: a partition, a frozen relay, a host that
// lost power), the standby
// is promoted, and later the old primary comes back still read-write and
// first in the URI. sagad must commit on the new primary within its
// statement deadline and a connect timeout of the promotion, answer
// /healthz throughout, and never write to the old primary again, even when
// its connections to the new one are cut and it must connect anew (libpq
// would pick the old primary first). Replication is synchronous: a write
// sent to the old primary would still be written there (its commit waits
// for a standby that left, but it is in its tables), so nothing but
// sagad's fence keeps the old primary from being written to.
// How the primary goes silent: its link held by a proxy (sagad's bytes
// accepted, nothing answered), or its host vanishing (a network namespace
// whose link is taken down: the kernel drops every packet both ways, sagad's
// TCP retransmits into the void, the standby loses its primary too).
enum class Silence { kLinkHeld, kHostVanished };

void SilentPrimary(Silence how) {
  std::unique_ptr<NetNs> ns;
  if (how == Silence::kHostVanished) ns = std::make_unique<NetNs>();
  PostgresServer primary(
      "wal_level = replica\nmax_wal_senders = 5\nsynchronous_standby_names = 'sagad_standby'\n",
      nullptr, "", ns.get());
  PostgresServer standby("synchronous_standby_names = ''\nwal_retrieve_retry_interval = '200ms'\n",
                         &primary, "sagad_standby");
  ASSERT_TRUE(WaitFor(
      [&] {
        return primary.QueryValue("postgres",
                                  "SELECT state FROM pg_stat_replication WHERE "
                                  "application_name = 'sagad_standby'") == "streaming";
      },
      std::chrono::seconds(60)))
      << "the standby never streamed";
  const std::string primary_uri = primary.NewDatabase();
  const std::string db = primary_uri.substr(primary_uri.rfind('/') + 1);
  std::unique_ptr<TcpProxy> link;
  std::string first = primary.host() + ":" + std::to_string(primary.port());
  if (how == Silence::kLinkHeld) {
    link = std::make_unique<TcpProxy>(primary.port());
    first = "127.0.0.1:" + std::to_string(link->port());
  }
  const std::string uri =
      "postgresql://postgres@" + first + ",127.0.0.1:" + std::to_string(standby.port()) + "/" + db;
  TempDir dir;
  Downstream downstream(/*dedup=*/false);
  json services = NonDeduplicating({"inventory", "payments", "shipping"});
  Coordinator sagad(downstream, dir.path() + "/data", services);
  sagad.Configure({{"store", uri}});
  sagad.LogTo(dir.path() + "/sagad.log");
  ASSERT_GT(sagad.Start(), 0);
  const int port = sagad.port();

  // Clients submit with keys until told to stop.
  std::atomic<bool> stop{false};
  std::atomic<int> acknowledged{0};
  std::mutex mu;
  std::vector<Submitted> answers;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c)
    clients.emplace_back([&, c] {
      Client cli(port);
      for (int i = 0; !stop; ++i) {
        json input = OrderInput();
        input["customer"] = "s-" + std::to_string(c) + "-" + std::to_string(i);
        Submitted s = cli.Submit("silent-" + std::to_string(c) + "-" + std::to_string(i), input,
                                 Clock::now() + std::chrono::minutes(2));
        if (!s.id.empty()) ++acknowledged;
        std::lock_guard<std::mutex> l(mu);
        answers.push_back(s);
      }
    });
  ASSERT_TRUE(WaitFor([&] { return acknowledged >= 20; }, std::chrono::seconds(60)));

  // The primary's host goes silent: no reset, no answer.
  if (link) link->Freeze();
  if (ns) ns->Cut();
  const int64_t frozen_at = WallMs();
  // What sagad committed before the silence is on the standby: the
  // replication is synchronous (with asynchronous replication a commit
  // acknowledged just before the silence was lost 2 times in 17 runs, and
  // a step sent after it went again: docs/postgresql.md says why; not what
  // this test is about). The wait below only makes sure it was replayed
  // (a vanished primary cannot be asked: the promotion replays what the
  // standby flushed, and every acknowledged commit was flushed there).
  if (link) {
    ASSERT_TRUE(WaitFor([&] {
      return primary.QueryValue("postgres",
                                "SELECT pg_current_wal_lsn() <= replay_lsn FROM "
                                "pg_stat_replication WHERE application_name = 'sagad_standby'") ==
             "t";
    }));
  }
  // SAGAD_FAILOVER_PROMOTE_AFTER_MS: a late promotion (an operator or a
  // failover manager that waits): the outage's shape, not a synchronisation.
  if (const char* late = std::getenv("SAGAD_FAILOVER_PROMOTE_AFTER_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(late)));
  standby.Promote();
  const int64_t promoted_at = WallMs();
  // /healthz answers from memory throughout.
  int64_t slowest_health_ms = 0;
  std::string first_commit;
  const bool moved = WaitFor(
      [&] {
        const auto h0 = Clock::now();
        EXPECT_EQ(Http(port, "GET", "/healthz").status, 200);
        slowest_health_ms = std::max<int64_t>(
            slowest_health_ms,
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - h0).count());
        first_commit = standby.QueryValue(
            db, "SELECT min(at) FROM sagad_batches WHERE answers IS NOT NULL AND at > " +
                    std::to_string(promoted_at));
        return !first_commit.empty() && first_commit.rfind("error", 0) != 0;
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(moved) << "no commit on the new primary: " << first_commit;
  const int64_t after_promotion = std::atoll(first_commit.c_str()) - promoted_at;
  const char* what = how == Silence::kLinkHeld ? "[silent primary]" : "[vanished primary]";
  std::cout << what << " first commit on the new primary " << after_promotion
            << " ms after the promotion (" << promoted_at - frozen_at
            << " ms after the link went silent); slowest /healthz " << slowest_health_ms << " ms\n";
  ::testing::Test::RecordProperty("silent_primary_to_first_commit_ms",
                                  std::to_string(after_promotion));
  EXPECT_LT(after_promotion, 12000);
  EXPECT_LT(slowest_health_ms, 1000);

  // The old primary comes back, read-write, first in the URI; what the link
  // held is delivered. Then sagad's connections to the new primary are cut:
  // it must connect anew, and refuse the old primary it finds first.
  if (link) link->Thaw();
  if (ns) ns->Restore();
  ASSERT_TRUE(WaitFor([&] {
    return standby.QueryValue(db,
                              "SELECT count(*) FROM pg_stat_activity WHERE "
                              "application_name = 'sagad'") != "0";
  }));
  standby.QueryValue("postgres",
                     "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                     "application_name = 'sagad'");
  const std::string old_before = primary.QueryValue(db, "SELECT count(*) FROM sagad_batches");
  const std::string new_before = standby.QueryValue(db, "SELECT count(*) FROM sagad_batches");
  const int acked_before = acknowledged;
  EXPECT_TRUE(WaitFor([&] { return acknowledged >= acked_before + 20; }, std::chrono::seconds(60)))
      << "no progress after the old primary came back";
  EXPECT_EQ(primary.QueryValue(db, "SELECT count(*) FROM sagad_batches"), old_before)
      << "sagad wrote to the old primary";
  if (::testing::Test::HasFailure()) {
    std::ifstream again(dir.path() + "/sagad.log");
    for (std::string line; std::getline(again, line);)
      if (line.find("primary") != std::string::npos || line.find("store") != std::string::npos)
        std::cout << line.substr(0, 300) << "\n";
  }
  EXPECT_NE(standby.QueryValue(db, "SELECT count(*) FROM sagad_batches"), new_before);
  EXPECT_TRUE(WaitFor([&] { return Http(port, "GET", "/readyz").status == 200; }))
      << Http(port, "GET", "/readyz").raw;
  EXPECT_NE(Http(port, "GET", "/metrics").raw.find("sagad_store_stale_primary 1"),
            std::string::npos)
      << "the old primary that came back is not named";
  stop = true;
  for (auto& t : clients) t.join();
  for (const auto& a : answers) {
    if (a.id.empty()) continue;
    json view = sagad.WaitStatus(a.id, "COMPLETED", std::chrono::seconds(60));
    EXPECT_EQ(view.value("status", ""), "COMPLETED") << a.key << " " << a.id;
  }
  EXPECT_EQ(RepeatedEffects(downstream), "");
  std::ifstream log(dir.path() + "/sagad.log");
  int refused = 0;
  for (std::string line; std::getline(log, line);)
    refused += line.find("old primary refused") != std::string::npos;
  std::cout << what << " the old primary was refused " << refused << " times\n";
  sagad.process().Kill(SIGTERM);
  EXPECT_EQ(sagad.process().Wait(std::chrono::seconds(15)), 0);
}

TEST(FailoverTest, ASilentPrimaryIsLeftWithinTheDeadlineAndNeverWrittenToWhenItComesBack) {
  SilentPrimary(Silence::kLinkHeld);
}

TEST(FailoverTest, APrimaryWhoseHostVanishesIsLeftWithinTheDeadlineAndNeverWrittenToAfter) {
  if (!NetNs::Available()) GTEST_SKIP() << "needs root and ip netns (CI has both)";
  SilentPrimary(Silence::kHostVanished);
}

}  // namespace
}  // namespace sagad::testing
