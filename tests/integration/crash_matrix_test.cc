// The crash matrix: sagad is killed (SAGA_CRASH_AT) at every persistence
// point of every step of incident_response, forward and compensating, against
// a deduplicating and a non-deduplicating downstream; a restarted sagad on the
// same data dir must finish with every effect exactly once.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

struct MatrixCase {
  std::string point;
  int n;  // the n-th time the point is reached = the n-th step (or compensation)
  bool dedup;
  bool compensation;
};

void PrintTo(const MatrixCase& c, std::ostream* os) {
  *os << c.point << ":" << c.n << (c.dedup ? " dedup" : " no-dedup");
}

class CrashMatrixTest : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(CrashMatrixTest, EveryEffectHappensExactlyOnce) {
  const MatrixCase& c = GetParam();
  TempDir dir;
  Downstream downstream(c.dedup);
  Coordinator sagad(
      downstream, dir.path() + "/data",
      c.dedup ? nlohmann::json::object() : NonDeduplicating({"ticketing", "edr", "iam", "mail"}));
  ASSERT_GT(sagad.Start(c.point + ":" + std::to_string(c.n)), 0);

  const std::string key = "incident-key";
  bool crashed = false;
  // Restarts sagad once it has died at the crash point.
  auto restart_if_crashed = [&](bool must_have_died) {
    if (crashed) return;
    if (!must_have_died && sagad.process().Running()) return;
    ASSERT_EQ(sagad.process().Wait(), 75);
    crashed = true;
    ASSERT_GT(sagad.Start(), 0);
  };
  // Submit; if sagad dies meanwhile, restart it and re-submit with the same key.
  Reply r = sagad.Submit("incident_response", IncidentInput(), 10, key);
  if (r.status == 0) {
    restart_if_crashed(true);
    r = sagad.Submit("incident_response", IncidentInput(), 10, key);
  }
  ASSERT_TRUE(r.body.is_object()) << r.raw;
  ASSERT_EQ(r.body.value("status", ""), "AWAITING_APPROVAL") << r.raw;
  std::string id = r.body["id"];

  std::string action = c.compensation ? "reject" : "approve";
  sagad.Post("/v1/instances/" + id + "/steps/notify_user/" + action, {{"reason", "test"}});
  std::string want = c.compensation ? "COMPENSATED" : "COMPLETED";
  // Until the instance settles, sagad may die at the crash point: restart it.
  nlohmann::json done;
  ASSERT_TRUE(WaitFor(
      [&] {
        Reply v = sagad.Get("/v1/instances/" + id + "?wait=1");
        if (v.status != 200) {
          restart_if_crashed(true);
          return false;
        }
        done = v.body;
        return done.value("status", "") == want;
      },
      std::chrono::seconds(30)))
      << done.dump();
  ASSERT_EQ(done.value("status", ""), want) << done.dump();
  // A crash point right after the final commit may fire just after a
  // reader saw the final status: give it a moment to.
  if (!crashed) {
    WaitFor([&] { return !sagad.process().Running(); }, std::chrono::seconds(5));
    restart_if_crashed(false);
  }
  EXPECT_TRUE(crashed) << "the crash point was never reached";
  // The listing's indexes agree with the snapshots after the crash (LMDB's:
  // PostgreSQL keeps its own).
  if (const char* s = std::getenv("SAGAD_TEST_STORE"); !s || std::string(s) != "postgres") {
    Subprocess verify({SAGACTL_BIN, "verify", "--data-dir", dir.path() + "/data"});
    const std::string verified = verify.ReadOutput();
    EXPECT_EQ(verify.Wait(), 0) << verified;
  }

  EXPECT_EQ(RepeatedEffects(downstream), "");
  nlohmann::json e = downstream.Effects();
  if (c.compensation) {
    EXPECT_EQ(e["total"], 6) << e.dump();  // 3 forward + 3 compensations
    for (const char* route : {"close_ticket", "release_host", "restore_account"})
      EXPECT_EQ(e["by_route"].value(route, 0), 1) << route;
    EXPECT_EQ(e["by_route"].value("send_message", 0), 0);
  } else {
    EXPECT_EQ(e["total"], 4) << e.dump();
  }
}

std::vector<MatrixCase> Cases() {
  std::vector<MatrixCase> out;
  for (bool dedup : {true, false}) {
    for (const char* p : {"before_started", "after_started", "before_outcome", "after_outcome"})
      for (int n = 1; n <= 4; ++n) out.push_back({p, n, dedup, false});
    for (const char* p : {"before_compensation_started", "after_compensation_started",
                          "before_compensation_outcome", "after_compensation_outcome"})
      for (int n = 1; n <= 3; ++n) out.push_back({p, n, dedup, true});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(IncidentResponse, CrashMatrixTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<MatrixCase>& i) {
                           return i.param.point + "_" + std::to_string(i.param.n) +
                                  (i.param.dedup ? "_dedup" : "_no_dedup");
                         });

// Downstream faults at every step of incident_response (forward and
// compensation): the outcome is unclear or the call failed before commit;
// sagad reconciles and each effect happens exactly once.
struct FaultMatrixCase {
  std::string action;
  std::string path;
  bool dedup;
  bool compensation;
};

void PrintTo(const FaultMatrixCase& c, std::ostream* os) {
  *os << c.action << " at " << c.path << (c.dedup ? " dedup" : " no-dedup");
}

class FaultMatrixTest : public ::testing::TestWithParam<FaultMatrixCase> {};

TEST_P(FaultMatrixTest, EveryEffectHappensExactlyOnce) {
  const FaultMatrixCase& c = GetParam();
  TempDir dir;
  Downstream downstream(c.dedup);
  Coordinator sagad(
      downstream, dir.path() + "/data",
      c.dedup ? nlohmann::json::object() : NonDeduplicating({"ticketing", "edr", "iam", "mail"}));
  ASSERT_GT(sagad.Start(), 0);
  nlohmann::json fault = {{"path", c.path}, {"action", c.action}};
  if (c.action == "delay") fault["delay_ms"] = 1300;  // sagad's timeout is 1000 ms
  downstream.Fault(fault);
  Reply r = sagad.Submit("incident_response", IncidentInput(), 20);
  ASSERT_EQ(r.body.value("status", ""), "AWAITING_APPROVAL") << r.raw;
  std::string id = r.body["id"];
  sagad.Post("/v1/instances/" + id + "/steps/notify_user/" +
             (c.compensation ? "reject" : "approve"));
  std::string want = c.compensation ? "COMPENSATED" : "COMPLETED";
  nlohmann::json done = sagad.WaitStatus(id, want, std::chrono::seconds(30));
  ASSERT_EQ(done.value("status", ""), want) << done.dump();
  EXPECT_EQ(RepeatedEffects(downstream), "");
  nlohmann::json e = downstream.Effects();
  EXPECT_EQ(e["total"], c.compensation ? 6 : 4) << e.dump();
}

std::vector<FaultMatrixCase> FaultCases() {
  std::vector<FaultMatrixCase> out;
  for (bool dedup : {true, false})
    for (const char* action : {"commit_drop", "commit_500", "fail_before_commit", "delay"}) {
      for (const char* path : {"/tickets", "/hosts/isolate", "/accounts/disable", "/messages"})
        out.push_back({action, path, dedup, false});
      for (const char* path : {"/tickets/T-1/close", "/hosts/release", "/accounts/restore"})
        out.push_back({action, path, dedup, true});
    }
  return out;
}

INSTANTIATE_TEST_SUITE_P(IncidentResponse, FaultMatrixTest, ::testing::ValuesIn(FaultCases()),
                         [](const ::testing::TestParamInfo<FaultMatrixCase>& i) {
                           std::string n = i.param.action + i.param.path;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n + (i.param.dedup ? "_dedup" : "_no_dedup");
                         });

}  // namespace
}  // namespace sagad::testing
