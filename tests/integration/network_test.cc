// The network toward a downstream, not only the process: a call whose
// packets stop mid-way (the request reached the service, which acted; its
// answer and everything after are held, nothing is reset: a host that
// vanished, a partition) goes UNKNOWN within the service's timeout, is
// never re-sent while the truth cannot be known, and is reconciled by
// asking the service once the link is back: one effect at a service that
// does not deduplicate. Twice: the packets held by a proxy (every host),
// and dropped by the kernel on a link to a network namespace taken down
// (root: CI), where sagad's own TCP retransmits into the void.
#include <gtest/gtest.h>

#include <chrono>

#include "tests/testing/cluster.h"
#include "tests/testing/netns.h"
#include "tests/testing/tcp_proxy.h"

namespace sagad::testing {
namespace {

// The charge (step 1) of `id` goes UNKNOWN within its timeout of `t0` (and
// the machine's slack), never minutes.
void ExpectUnknownInTime(Coordinator& sagad, const std::string& id,
                         std::chrono::steady_clock::time_point t0, int64_t timeout_ms) {
  nlohmann::json view;
  ASSERT_TRUE(WaitFor([&] {
    view = sagad.Get("/v1/instances/" + id).body;
    return view["steps"][1].value("status", "") == "UNKNOWN";
  })) << view.dump();
  const double unknown_after_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(unknown_after_ms, timeout_ms + 3000) << "UNKNOWN after " << unknown_after_ms << " ms";
}

TEST(NetworkTest, PacketsDroppedMidCallMakeTheStepUnknownInTimeAndItIsReconciledNotResent) {
  TempDir dir;
  Downstream downstream(/*dedup=*/false);
  TcpProxy link(downstream.port());
  const int64_t timeout_ms = 1000;
  Coordinator sagad(downstream, dir.path() + "/data",
                    {{"payments",
                      {{"base_url", "http://127.0.0.1:" + std::to_string(link.port())},
                       {"timeout_ms", timeout_ms}}}});
  ASSERT_GT(sagad.Start(), 0);
  link.FreezeOn("/charges");  // the charge arrives; then no packet moves
  const auto t0 = std::chrono::steady_clock::now();
  Reply submitted = sagad.Submit("order_fulfilment", OrderInput());
  ASSERT_EQ(submitted.status, 201) << submitted.raw;
  const std::string id = submitted.body["id"];
  ASSERT_NO_FATAL_FAILURE(ExpectUnknownInTime(sagad, id, t0, timeout_ms));
  nlohmann::json view;
  EXPECT_EQ(downstream.RouteCount("charge_payment"), 1);  // the service did act
  // While the link is down nothing can be known: the charge is not sent
  // again (its questions are held as well).
  EXPECT_FALSE(WaitFor([&] { return downstream.RouteCount("charge_payment") > 1; },
                       std::chrono::milliseconds(2 * timeout_ms)));
  link.Thaw();
  view = sagad.WaitStatus(id, "COMPLETED");
  EXPECT_EQ(view["status"], "COMPLETED") << view.dump();
  EXPECT_EQ(downstream.RouteCount("charge_payment"), 1);
  EXPECT_EQ(RepeatedEffects(downstream), "");
  EXPECT_GE(view["steps"][1].value("reconciliations", 0), 1) << view.dump();
}

TEST(NetworkTest, AHostThatVanishesMidCallMakesTheStepUnknownInTimeAndItIsReconciledNotResent) {
  if (!NetNs::Available()) GTEST_SKIP() << "needs root and ip netns (CI has both)";
  NetNs ns;
  TempDir dir;
  Downstream downstream(/*dedup=*/false, &ns);
  const int64_t timeout_ms = 1000;
  Coordinator sagad(downstream, dir.path() + "/data", {{"payments", {{"timeout_ms", timeout_ms}}}});
  ASSERT_GT(sagad.Start(), 0);
  // The charge is held in the service long enough to cut the link under it;
  // uncut, its answer would come well within the timeout.
  downstream.Fault({{"path", "/charges"}, {"action", "delay"}, {"delay_ms", 700}, {"times", 1}});
  Reply submitted = sagad.Submit("order_fulfilment", OrderInput());
  ASSERT_EQ(submitted.status, 201) << submitted.raw;
  const std::string id = submitted.body["id"];
  ASSERT_TRUE(WaitFor([&] { return downstream.Effects().value("pending", 0) > 0; }));
  ns.Cut();  // the service acts, and its answer goes nowhere
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(ExpectUnknownInTime(sagad, id, t0, timeout_ms));
  nlohmann::json view;
  // Nothing can be learnt while the link is down: the saga does not move on.
  EXPECT_FALSE(WaitFor([&] { return sagad.Get("/v1/instances/" + id).body["status"] != "RUNNING"; },
                       std::chrono::milliseconds(3 * timeout_ms)));
  ns.Restore();
  view = sagad.WaitStatus(id, "COMPLETED");
  EXPECT_EQ(view["status"], "COMPLETED") << view.dump();
  EXPECT_EQ(downstream.RouteCount("charge_payment"), 1);  // acted once, never re-sent
  EXPECT_EQ(RepeatedEffects(downstream), "");
  EXPECT_GE(view["steps"][1].value("reconciliations", 0), 1) << view.dump();
}

}  // namespace
}  // namespace sagad::testing
