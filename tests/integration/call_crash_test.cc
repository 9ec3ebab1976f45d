// The crash matrix of agent runs: sagad is killed (SAGA_CRASH_AT) at every
// persistence point of each call of a soc_tools run, and of each undo after
// an abort, against a deduplicating and a non-deduplicating downstream. The
// agent, whose request died with sagad, asks again with the same call_id
// once sagad is back; every effect happens exactly once and the run ends as
// its agent asked.
#include <gtest/gtest.h>

#include "tests/testing/cluster.h"
#include "tests/testing/crash_matrix.h"

namespace sagad::testing {
namespace {

class CallCrashTest : public ::testing::TestWithParam<CrashCase> {};

TEST_P(CallCrashTest, EveryCallTakesEffectOnceAndTheRunEndsAsAsked) {
  const CrashCase& c = GetParam();  // compensation: the run is aborted
  TempDir dir;
  Downstream downstream(c.dedup);
  Coordinator sagad(downstream, dir.path() + "/data",
                    ServicesFor(c, {"ticketing", "edr", "iam", "mail"}));
  CrashingSagad crashing(sagad, c);
  // The agent's request; when sagad died under it, the same request again.
  auto ask = [&](const std::string& path, const nlohmann::json& body,
                 const std::map<std::string, std::string>& headers = {}) {
    Reply r;
    for (int tries = 0; tries < 3; ++tries) {
      r = Http(sagad.port(), "POST", path, body.dump(), headers);
      if (r.status != 0 && r.status != 503) return r;
      WaitFor([&] { return !sagad.process().Running(); }, std::chrono::seconds(2));
      crashing.Restart(/*must_have_died=*/false);
    }
    return r;
  };
  Reply opened = ask("/v1/toolboxes/soc_tools/runs", {{"input", {{"incident", "INC-9"}}}},
                     {{"Idempotency-Key", "run-of-agent-9"}});
  ASSERT_EQ(opened.status, 201) << opened.raw;
  const std::string run = opened.body["id"];
  const std::vector<std::pair<std::string, nlohmann::json>> calls = {
      {"create_ticket", {{"title", "t"}, {"severity", "high"}, {"source_ip", "203.0.113.5"}}},
      {"block_ip", {{"ip", "203.0.113.5"}}},
      {"disable_account", {{"user", "carol"}}}};
  for (size_t i = 0; i < calls.size(); ++i) {
    const nlohmann::json call = {{"call_id", "c" + std::to_string(i)},
                                 {"tool", calls[i].first},
                                 {"arguments", calls[i].second}};
    nlohmann::json got;
    ASSERT_TRUE(WaitFor(
        [&] {
          Reply r = ask("/v1/instances/" + run + "/calls?wait=2", call);
          got = r.body;
          return r.status == 200 && got.value("status", "") == "COMMITTED";
        },
        std::chrono::seconds(40)))
        << got.dump();
  }
  const std::string want = c.compensation ? "COMPENSATED" : "COMPLETED";
  Reply ended =
      ask("/v1/instances/" + run + (c.compensation ? "/abort" : "/finish"), {{"reason", "t"}});
  ASSERT_EQ(ended.status, 200) << ended.raw;
  nlohmann::json done;
  ASSERT_TRUE(WaitFor(
      [&] {
        Reply v = sagad.Get("/v1/instances/" + run + "?wait=1");
        if (v.status != 200) {
          crashing.Restart(/*must_have_died=*/false);
          return false;
        }
        done = v.body;
        return done.value("status", "") == want;
      },
      std::chrono::seconds(40)))
      << done.dump();
  EXPECT_TRUE(crashing.Reached()) << "the crash point was never reached";
  const std::vector<std::string> effects = {"create_ticket", "block_ip", "disable_account"};
  if (!c.compensation) return ExpectEffects(downstream, 3, effects);
  std::vector<std::string> both = effects;
  for (const char* undo : {"close_ticket", "unblock_ip", "restore_account"}) both.push_back(undo);
  ExpectEffects(downstream, 6, both);
}

// The undos against a non-deduplicating downstream only.
INSTANTIATE_TEST_SUITE_P(SocTools, CallCrashTest, ::testing::ValuesIn(CrashCases(3, 1, 3, {false})),
                         CrashCaseName);

}  // namespace
}  // namespace sagad::testing
