// The crash matrix: sagad is killed (SAGA_CRASH_AT) at every persistence
// point of every step of incident_response, forward and compensating, against
// a deduplicating and a non-deduplicating downstream; a restarted sagad on the
// same data dir must finish with every effect exactly once.
#include "tests/testing/crash_matrix.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

class CrashMatrixTest : public ::testing::TestWithParam<CrashCase> {};

TEST_P(CrashMatrixTest, EveryEffectHappensExactlyOnce) {
  const CrashCase& c = GetParam();
  TempDir dir;
  Downstream downstream(c.dedup);
  Coordinator sagad(downstream, dir.path() + "/data",
                    ServicesFor(c, {"ticketing", "edr", "iam", "mail"}));
  CrashingSagad crashing(sagad, c);

  const std::string key = "incident-key";
  // Submit; if sagad dies meanwhile, restart it and re-submit with the same key.
  Reply r = sagad.Submit("incident_response", IncidentInput(), 10, key);
  if (r.status == 0) {
    crashing.Restart(/*must_have_died=*/true);
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
          crashing.Restart(/*must_have_died=*/true);
          return false;
        }
        done = v.body;
        return done.value("status", "") == want;
      },
      std::chrono::seconds(30)))
      << done.dump();
  ASSERT_EQ(done.value("status", ""), want) << done.dump();
  EXPECT_TRUE(crashing.Reached()) << "the crash point was never reached";
  // The listing's indexes agree with the snapshots after the crash (LMDB's:
  // PostgreSQL keeps its own).
  if (const char* s = std::getenv("SAGAD_TEST_STORE"); !s || std::string(s) != "postgres") {
    Subprocess verify({SAGACTL_BIN, "verify", "--data-dir", dir.path() + "/data"});
    const std::string verified = verify.ReadOutput();
    EXPECT_EQ(verify.Wait(), 0) << verified;
  }
  if (c.compensation)  // 3 forward + 3 compensations; the message never went
    ExpectEffects(downstream, 6, {"close_ticket", "release_host", "restore_account"},
                  {"send_message"});
  else
    ExpectEffects(downstream, 4, {});
}

INSTANTIATE_TEST_SUITE_P(IncidentResponse, CrashMatrixTest,
                         ::testing::ValuesIn(CrashCases(4, 1, 3)), CrashCaseName);

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
