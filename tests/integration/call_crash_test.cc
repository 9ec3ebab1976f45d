// The crash matrix of agent runs: sagad is killed (SAGA_CRASH_AT) at every
// persistence point of each call of a soc_tools run, and of each undo after
// an abort, against a deduplicating and a non-deduplicating downstream. The
// agent, whose request died with sagad, asks again with the same call_id
// once sagad is back; every effect happens exactly once and the run ends as
// its agent asked.
#include <gtest/gtest.h>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

struct CallCase {
  std::string point;
  int n;  // the n-th time the point is reached = the n-th call (or undo)
  bool dedup;
  bool abort;
};

void PrintTo(const CallCase& c, std::ostream* os) {
  *os << c.point << ":" << c.n << (c.dedup ? " dedup" : " no-dedup");
}

class CallCrashTest : public ::testing::TestWithParam<CallCase> {};

TEST_P(CallCrashTest, EveryCallTakesEffectOnceAndTheRunEndsAsAsked) {
  const CallCase& c = GetParam();
  TempDir dir;
  Downstream downstream(c.dedup);
  Coordinator sagad(
      downstream, dir.path() + "/data",
      c.dedup ? nlohmann::json::object() : NonDeduplicating({"ticketing", "edr", "iam", "mail"}));
  ASSERT_GT(sagad.Start(c.point + ":" + std::to_string(c.n)), 0);
  bool crashed = false;
  auto restart_if_crashed = [&] {
    if (crashed || sagad.process().Running()) return;
    ASSERT_EQ(sagad.process().Wait(), 75);
    crashed = true;
    ASSERT_GT(sagad.Start(), 0);
  };
  // The agent's request; when sagad died under it, the same request again.
  auto ask = [&](const std::string& path, const nlohmann::json& body,
                 const std::map<std::string, std::string>& headers = {}) {
    Reply r;
    for (int tries = 0; tries < 3; ++tries) {
      r = Http(sagad.port(), "POST", path, body.dump(), headers);
      if (r.status != 0 && r.status != 503) return r;
      WaitFor([&] { return !sagad.process().Running(); }, std::chrono::seconds(2));
      restart_if_crashed();
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
  const std::string want = c.abort ? "COMPENSATED" : "COMPLETED";
  Reply ended = ask("/v1/instances/" + run + (c.abort ? "/abort" : "/finish"), {{"reason", "t"}});
  ASSERT_EQ(ended.status, 200) << ended.raw;
  nlohmann::json done;
  ASSERT_TRUE(WaitFor(
      [&] {
        Reply v = sagad.Get("/v1/instances/" + run + "?wait=1");
        if (v.status != 200) {
          restart_if_crashed();
          return false;
        }
        done = v.body;
        return done.value("status", "") == want;
      },
      std::chrono::seconds(40)))
      << done.dump();
  if (!crashed) {
    WaitFor([&] { return !sagad.process().Running(); }, std::chrono::seconds(5));
    restart_if_crashed();
  }
  EXPECT_TRUE(crashed) << "the crash point was never reached";
  EXPECT_EQ(RepeatedEffects(downstream), "");
  nlohmann::json e = downstream.Effects();
  EXPECT_EQ(e["total"], c.abort ? 6 : 3) << e.dump();
  for (const char* route : {"create_ticket", "block_ip", "disable_account"})
    EXPECT_EQ(e["by_route"].value(route, 0), 1) << route;
  if (c.abort) {
    for (const char* route : {"close_ticket", "unblock_ip", "restore_account"})
      EXPECT_EQ(e["by_route"].value(route, 0), 1) << route;
  }
}

std::vector<CallCase> Cases() {
  std::vector<CallCase> out;
  for (bool dedup : {true, false})
    for (const char* p : {"before_started", "after_started", "before_outcome", "after_outcome"})
      for (int n = 1; n <= 3; ++n) out.push_back({p, n, dedup, false});
  for (const char* p : {"before_compensation_started", "after_compensation_started",
                        "before_compensation_outcome", "after_compensation_outcome"})
    for (int n = 1; n <= 3; ++n) out.push_back({p, n, false, true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(SocTools, CallCrashTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<CallCase>& i) {
                           return i.param.point + "_" + std::to_string(i.param.n) +
                                  (i.param.dedup ? "_dedup" : "_no_dedup");
                         });

}  // namespace
}  // namespace sagad::testing
