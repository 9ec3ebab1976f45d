// Crash and fault tests: SIGKILL via crash points at persistence boundaries,
// lost responses and ambiguous 5xx, against deduplicating and
// non-deduplicating downstreams. Effects must happen exactly once.
#include <gtest/gtest.h>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

struct Env {
  TempDir dir;
  std::unique_ptr<Downstream> downstream;
  std::unique_ptr<Coordinator> coordinator;
  explicit Env(bool dedup, nlohmann::json overrides = nlohmann::json::object()) {
    downstream = std::make_unique<Downstream>(dedup);
    coordinator = std::make_unique<Coordinator>(*downstream, dir.path() + "/data", overrides);
  }
  void ExpectEachOnce() { EXPECT_EQ(RepeatedEffects(*downstream), ""); }
};

// Downstream faults after (or without) the commit: the coordinator records
// UNKNOWN, asks GET /operations/{key}, and never sends the same effect twice.
struct FaultCase {
  std::string action;
  bool dedup;
};

void PrintTo(const FaultCase& c, std::ostream* os) {
  *os << c.action << (c.dedup ? " dedup" : " no-dedup");
}

class UnknownOutcomeTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(UnknownOutcomeTest, IsReconciledBeforeAnyResend) {
  const FaultCase& c = GetParam();
  Env env(c.dedup, c.dedup ? nlohmann::json::object() : NonDeduplicating({"payments"}));
  ASSERT_GT(env.coordinator->Start(), 0);
  nlohmann::json fault = {{"path", "/charges"}, {"action", c.action}};
  if (c.action == "delay") fault["delay_ms"] = 1500;  // sagad's timeout is 1000 ms
  env.downstream->Fault(fault);
  Reply r = env.coordinator->Submit("order_fulfilment", OrderInput(), 20);
  ASSERT_EQ(r.status, 200) << r.raw;
  std::string id = r.body["id"];
  nlohmann::json done = env.coordinator->WaitStatus(id, "COMPLETED");
  EXPECT_EQ(done["status"], "COMPLETED") << done.dump();
  env.ExpectEachOnce();
  EXPECT_EQ(env.downstream->RouteCount("charge_payment"), 1);
  EXPECT_EQ(env.downstream->Effects()["total"], 3);
  bool saw_unknown = false;
  for (const auto& e : Events(*env.coordinator, id)) saw_unknown |= e["type"] == "outcome_unknown";
  EXPECT_TRUE(saw_unknown);  // never written as FAILED
}

INSTANTIATE_TEST_SUITE_P(
    Faults, UnknownOutcomeTest,
    ::testing::Values(FaultCase{"commit_drop", true}, FaultCase{"commit_drop", false},
                      FaultCase{"commit_500", true}, FaultCase{"commit_500", false},
                      FaultCase{"fail_before_commit", true}, FaultCase{"fail_before_commit", false},
                      FaultCase{"delay", true}, FaultCase{"delay", false}),
    [](const ::testing::TestParamInfo<FaultCase>& i) {
      return i.param.action + (i.param.dedup ? "_dedup" : "_no_dedup");
    });

// sagad dies at a crash point; a restarted sagad on the same data dir
// finishes the instance with every effect exactly once.
struct CrashCase {
  std::string point;
  bool dedup;
};

void PrintTo(const CrashCase& c, std::ostream* os) {
  *os << c.point << (c.dedup ? " dedup" : " no-dedup");
}

class CrashPointTest : public ::testing::TestWithParam<CrashCase> {};

TEST_P(CrashPointTest, RestartFinishesWithEveryEffectOnce) {
  const CrashCase& c = GetParam();
  Env env(c.dedup, c.dedup ? nlohmann::json::object()
                           : NonDeduplicating({"inventory", "payments", "shipping"}));
  ASSERT_GT(env.coordinator->Start(c.point), 0);
  Reply r = env.coordinator->Submit("order_fulfilment", OrderInput(), 10, "client-key-1");
  EXPECT_EQ(env.coordinator->process().Wait(), 75) << "sagad did not stop at " << c.point;
  ASSERT_GT(env.coordinator->Start(), 0);
  // The client retries its submission with the same key and gets the same instance.
  Reply again = env.coordinator->Submit("order_fulfilment", OrderInput(), 20, "client-key-1");
  ASSERT_TRUE(again.status == 200 || again.status == 201) << again.raw;
  std::string id = again.body["id"];
  if (r.status != 0) {
    EXPECT_EQ(r.body["id"], id);
  }
  nlohmann::json done = env.coordinator->WaitStatus(id, "COMPLETED");
  EXPECT_EQ(done["status"], "COMPLETED") << done.dump();
  EXPECT_EQ(env.downstream->Effects()["total"], 3);
  env.ExpectEachOnce();
  EXPECT_EQ(env.coordinator->Get("/v1/instances").body["instances"].size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(
    Points, CrashPointTest,
    ::testing::Values(CrashCase{"after_create", true}, CrashCase{"before_started:2", true},
                      CrashCase{"after_started:2", true}, CrashCase{"after_started:2", false},
                      CrashCase{"before_outcome:2", true}, CrashCase{"before_outcome:2", false},
                      CrashCase{"after_outcome:2", false}),
    [](const ::testing::TestParamInfo<CrashCase>& i) {
      std::string n = i.param.point;
      for (char& ch : n)
        if (ch == ':') ch = '_';
      return n + (i.param.dedup ? "_dedup" : "_no_dedup");
    });

TEST(CompensationCrashTest, CrashInsideCompensationStillCompensatesEachStepOnce) {
  for (const char* point : {"after_compensation_started:2", "before_compensation_outcome:1"}) {
    SCOPED_TRACE(point);
    Env env(false, {{"inventory", {{"idempotent", false}}},
                    {"payments", {{"idempotent", false}}},
                    {"shipping", {{"idempotent", false}}}});
    ASSERT_GT(env.coordinator->Start(point), 0);
    env.downstream->Fault({{"path", "/shipments"}, {"action", "reject"}});
    env.coordinator->Submit("order_fulfilment", OrderInput(), 10);
    EXPECT_EQ(env.coordinator->process().Wait(), 75);
    ASSERT_GT(env.coordinator->Start(), 0);
    Reply list = env.coordinator->Get("/v1/instances");
    ASSERT_EQ(list.body["instances"].size(), 1u);
    std::string id = list.body["instances"][0]["id"];
    EXPECT_EQ(env.coordinator->WaitStatus(id, "COMPENSATED")["status"], "COMPENSATED");
    EXPECT_EQ(env.downstream->RouteCount("release_reservation"), 1);
    EXPECT_EQ(env.downstream->RouteCount("refund_charge"), 1);
    env.ExpectEachOnce();
  }
}

TEST(ReviewTest, UnanswerableUnknownGoesToReviewAndAnOperatorResolvesIt) {
  Env env(false, {{"payments", {{"idempotent", false}, {"queryable", false}}}});
  ASSERT_GT(env.coordinator->Start(), 0);
  env.downstream->Fault({{"path", "/charges"}, {"action", "commit_500"}});
  Reply r = env.coordinator->Submit("order_fulfilment", OrderInput(), 10);
  ASSERT_EQ(r.body["status"], "NEEDS_REVIEW") << r.raw;
  std::string id = r.body["id"];
  EXPECT_EQ(env.downstream->RouteCount("charge_payment"), 1);  // never re-sent blindly
  Reply bundle = env.coordinator->Get("/v1/instances/" + id + "/bundle");
  ASSERT_EQ(bundle.status, 200);
  ASSERT_EQ(bundle.body["unknown_effects"].size(), 1u);
  EXPECT_EQ(bundle.body["unknown_effects"][0]["key"], id + ":charge_payment");
  EXPECT_EQ(bundle.body["confirmed_effects"].size(), 1u);
  Reply res = env.coordinator->Post("/v1/instances/" + id + "/steps/charge_payment/resolve",
                                    {{"outcome", "committed"},
                                     {"external_ref", "C-2"},
                                     {"comment", "seen in the payments console"}});
  ASSERT_EQ(res.status, 200) << res.raw;
  nlohmann::json done = env.coordinator->WaitStatus(id, "COMPLETED");
  EXPECT_EQ(done["status"], "COMPLETED");
  EXPECT_EQ(done["steps"][1]["external_ref"], "C-2");
  EXPECT_EQ(env.downstream->RouteCount("charge_payment"), 1);
}

}  // namespace
}  // namespace sagad::testing
