// The API front end under clients that try to starve it: 300 connections
// trickling a header line every 2 s, and 1,000 new connections opened at
// once and left silent. Meanwhile another client's GET /healthz and an
// approval are answered within 1 s, sagad's thread count stays where it
// was, and the tricklers are cut off at the request deadline.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "tests/testing/cluster.h"
#include "tests/testing/thread_names.h"

namespace sagad::testing {
namespace {

using Clock = std::chrono::steady_clock;

int Threads(pid_t pid) {
  int n = 0;
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (!d) return -1;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// A non-blocking connection to 127.0.0.1:port (the connect may still be in
// progress); -1 if no socket could be made.
int Open(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  return fd;
}

// sagad_http_connections_open from /metrics (this scrape's own included).
// How long a client may wait for an answer while others hold connections:
// 1 s, and 5 s in a sanitizer build, where everything runs 5-15 times slower
// (TSan once took 1,035 ms). The bound is about not waiting behind the other
// clients (a starved server takes their whole 2-10 s), not about speed.
constexpr long kAnswerWithinMs =
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    5000;
#else
    1000;
#endif

int OpenConnections(int port) {
  Reply m = Http(port, "GET", "/metrics");
  size_t at = m.raw.find("\nsagad_http_connections_open ");
  return at == std::string::npos ? -1 : std::atoi(m.raw.c_str() + at + 29);
}

bool SendAll(int fd, const std::string& s) {
  return send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

// True once the peer closed `fd` (EOF or reset), reading what it sent.
bool PeerClosed(int fd) {
  char buf[512];
  while (true) {
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

TEST(FrontEndTest, NoClientCanStarveTheOthers) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  ASSERT_GE(rl.rlim_cur, 2000u) << "this test needs 1,300 sockets";

  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  sagad.Configure({{"api", {{"request_timeout_ms", 4000}}}});
  ASSERT_GT(sagad.Start(), 0);
  const int port = sagad.port();
  Reply r = sagad.Submit("incident_response", IncidentInput(), 10);
  ASSERT_EQ(r.body.value("status", ""), "AWAITING_APPROVAL") << r.raw;
  std::string id = r.body["id"];
  const int threads_before = Threads(sagad.process().pid());

  // 300 tricklers: a request line, then one header line every 2 s.
  std::vector<int> tricklers;
  for (int i = 0; i < 300; ++i) tricklers.push_back(Open(port));
  auto trickle_start = Clock::now();
  ASSERT_TRUE(WaitFor(
      [&] {
        int sent = 0;
        for (int fd : tricklers) sent += SendAll(fd, "GET /healthz HTTP/1.1\r\n") ? 1 : 0;
        return sent == 300;
      },
      std::chrono::seconds(5)));
  std::atomic<bool> stop{false};
  std::thread trickler([&] {
    while (!stop) {
      for (int fd : tricklers) SendAll(fd, "X-Slow: 1\r\n");
      for (int k = 0; k < 20 && !stop; ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  // 1,000 more at once, silent.
  std::vector<int> silent;
  for (int i = 0; i < 1000; ++i) silent.push_back(Open(port));

  // Another client meanwhile: each answer within 1 s.
  for (int round = 0; round < 3; ++round) {
    auto t0 = Clock::now();
    Reply h = Http(port, "GET", "/healthz");
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    EXPECT_EQ(h.status, 200) << h.raw;
    EXPECT_LT(ms, kAnswerWithinMs) << "GET /healthz took " << ms << " ms";
  }
  auto t0 = Clock::now();
  Reply a = sagad.Post("/v1/instances/" + id + "/steps/notify_user/approve", {{"comment", "ok"}});
  auto approve_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_EQ(a.status, 200) << a.raw;
  EXPECT_LT(approve_ms, kAnswerWithinMs) << "the approval took " << approve_ms << " ms";
  EXPECT_EQ(sagad.WaitStatus(id, "COMPLETED")["status"], "COMPLETED");

  // No thread per connection.
  int threads_during = Threads(sagad.process().pid());
  EXPECT_LE(threads_during, threads_before + 4) << "threads: " << threads_before << " before, "
                                                << threads_during << " with 1,300 connections";

  // The tricklers are cut off at the 4 s request deadline (they would go on
  // for ever), with a 408 or a close.
  EXPECT_TRUE(WaitFor(
      [&] {
        for (int fd : tricklers)
          if (!PeerClosed(fd)) return false;
        return true;
      },
      std::chrono::seconds(15)))
      << "tricklers still connected";
  auto cut_after =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - trickle_start).count();
  EXPECT_GE(cut_after, 3000);
  stop = true;
  trickler.join();
  for (int fd : tricklers) close(fd);
  for (int fd : silent) close(fd);
  EXPECT_EQ(Http(port, "GET", "/healthz").status, 200);
}

TEST(FrontEndTest, ConnectionsBeyondTheCapGetA503) {
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  sagad.Configure({{"api", {{"max_connections", 50}, {"max_connections_per_client", 20}}}});
  ASSERT_GT(sagad.Start(), 0);
  std::vector<int> held;
  for (int i = 0; i < 20; ++i) held.push_back(Open(sagad.port()));
  // Accepted (or refused) in order: wait until the server has seen them all.
  std::string busy;
  ASSERT_TRUE(WaitFor(
      [&] {
        Reply r = Http(sagad.port(), "GET", "/healthz");
        busy = r.raw;
        return r.status == 503;
      },
      std::chrono::seconds(5)))
      << busy;
  EXPECT_NE(busy.find("too many connections"), std::string::npos) << busy;
  for (int fd : held) close(fd);
  EXPECT_TRUE(WaitFor([&] { return Http(sagad.port(), "GET", "/healthz").status == 200; },
                      std::chrono::seconds(5)));
}

TEST(FrontEndTest, LongPollsHoldNoThread) {
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  ASSERT_GT(sagad.Start(), 0);
  Reply r = sagad.Submit("incident_response", IncidentInput(), 10);
  ASSERT_EQ(r.body.value("status", ""), "AWAITING_APPROVAL") << r.raw;
  std::string id = r.body["id"];
  // An instance that stays RUNNING for as long as the test needs: the service
  // of its first step is paused, so its call waits in sagad and nothing times out.
  ASSERT_EQ(sagad.Post("/v1/services/inventory/pause").status, 200);
  Reply o = sagad.Submit("order_fulfilment", OrderInput());
  ASSERT_EQ(o.status, 201) << o.raw;
  std::string running = o.body["id"];
  const int before = Threads(sagad.process().pid());
  // 300 clients long-poll it (more than a thread-per-request server has).
  // The polls may wait a minute: the test ends them by resuming the service,
  // so all 300 are open at once however slowly a loaded machine starts them
  // (CI under ThreadSanitizer once needed more than 3 s, then more than 10).
  std::atomic<int> answered{0};
  std::mutex last_mu;
  std::string last_other;  // one reply that was not the instance, COMPLETED
  std::vector<std::thread> pollers;
  auto end_polls = [&] {
    sagad.Post("/v1/services/inventory/resume");
    for (auto& t : pollers)
      if (t.joinable()) t.join();
  };
  for (int i = 0; i < 300; ++i)
    pollers.emplace_back([&] {
      Reply v = sagad.Get("/v1/instances/" + running + "?wait=60");
      if (v.status == 200 && v.body.value("status", "") == "COMPLETED") {
        ++answered;
      } else {
        std::lock_guard<std::mutex> lock(last_mu);
        last_other = v.raw.substr(0, 400);
      }
    });
  int open = 0;
  bool all_open = WaitFor(
      [&] {
        open = OpenConnections(sagad.port());
        return open >= 300;
      },
      std::chrono::seconds(50));
  if (!all_open) end_polls();
  ASSERT_TRUE(all_open) << open << " connections open; " << answered << " polls answered; "
                        << "another answer: " << last_other;
  int during = Threads(sagad.process().pid());
  auto t0 = Clock::now();
  Reply h = Http(sagad.port(), "GET", "/healthz");
  Reply a = sagad.Post("/v1/instances/" + id + "/steps/notify_user/approve");
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(a.status, 200) << a.raw;
  EXPECT_LT(ms, kAnswerWithinMs) << "health check and approval took " << ms
                                 << " ms behind 300 long polls";
  EXPECT_EQ(answered, 0) << "a poll ended before its instance did: " << last_other;
  // Resumed, the instance completes, and every poll is answered with it.
  end_polls();
  EXPECT_EQ(answered, 300) << last_other;
  EXPECT_LE(during, before + 4) << before << " threads before, " << during << " during";
}

// A long poll whose instance has already settled is answered at once, from
// the handler's own thread: the answer goes out once, and the connection is
// reused for the next request (the first version could send it twice and
// abort on a second pending write).
TEST(FrontEndTest, ALongPollOnASettledInstanceIsAnsweredOnce) {
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  ASSERT_GT(sagad.Start(), 0);
  Reply r = sagad.Submit("order_fulfilment", OrderInput(), 10);
  ASSERT_EQ(r.body.value("status", ""), "COMPLETED") << r.raw;
  std::string id = r.body["id"];
  httplib::Client client("127.0.0.1", sagad.port());
  client.set_keep_alive(true);
  for (int i = 0; i < 500; ++i) {
    auto res = client.Get(("/v1/instances/" + id + "?wait=5").c_str());
    ASSERT_TRUE(res) << "request " << i << ": " << httplib::to_string(res.error());
    ASSERT_EQ(res->status, 200) << res->body;
  }
  EXPECT_TRUE(sagad.process().Running());
}

// The threads of a sagad configured as a default one is on 2 cores, by name
// (what top -H shows), once its calls went out: services at an IP address
// need no resolver thread. 2 x 2 cores + 4 = 8 at most.
TEST(FrontEndTest, ASagadRunsTheThreadsItNames) {
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  sagad.Configure({{"workers", 2}, {"api", {{"threads", 2}, {"history_readers", 1}}}});
  ASSERT_GT(sagad.Start(), 0);
  for (int i = 0; i < 3; ++i) {
    Reply r = sagad.Submit("order_fulfilment", OrderInput(), 10);
    ASSERT_EQ(r.body.value("status", ""), "COMPLETED") << r.raw;
  }
  const std::multiset<std::string> names = ThreadNames(std::to_string(sagad.process().pid()));
  // The main thread runs the API's event loop (and reads the stop signals,
  // and the watchdog looks from it) under the process's name; the handlers
  // run on the housekeeping threads; one loop reads the downstream replies.
  // No timer thread (each shard keeps its own timers), no probe thread (the
  // housekeeping probes).
  std::multiset<std::string> expected = {"sagad",         "sagad-shard-0", "sagad-shard-1",
                                         "sagad-calls",   "sagad-commit",  "sagad-reader",
                                         "sagad-house-0", "sagad-house-1"};
#if defined(__SANITIZE_THREAD__)
  expected.insert("sagad");  // ThreadSanitizer's runtime runs a thread of its own
#endif
  EXPECT_EQ(names, expected);
}

}  // namespace
}  // namespace sagad::testing
