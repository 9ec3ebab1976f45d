// Property: for random valid histories (any interleaving the machines accept,
// reconciliations, retries, operator decisions), the state built event by
// event equals the state replayed from the serialized log, at every prefix
// (a crash can cut the log anywhere).
#include <gtest/gtest.h>

#include <random>

#include "examples/examples.h"
#include "sagas/instance.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

Event RoundTrip(const Event& e) {
  auto back = Event::FromJson(nlohmann::json::parse(e.ToJson().dump()));
  EXPECT_TRUE(back.ok());
  return *back;
}

TEST(ReplayPropertyTest, IncrementalStateEqualsReplayOfTheSerializedLogAtEveryPrefix) {
  const SagaDefinition def = IncidentResponse();
  const std::vector<std::string> step_types = {"approval_requested",
                                               "approved",
                                               "rejected",
                                               "started",
                                               "committed",
                                               "failed",
                                               "outcome_unknown",
                                               "not_executed",
                                               "escalated",
                                               "compensation_started",
                                               "compensated",
                                               "compensation_unknown",
                                               "skipped",
                                               "reconciled",
                                               "retry_deferred",
                                               "retry_requested"};
  const std::vector<std::string> saga_types = {"saga_awaiting_approval", "saga_resumed",
                                               "saga_completed",         "saga_compensating",
                                               "saga_compensated",       "saga_needs_review"};
  int transitions = 0;
  for (unsigned seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
    std::vector<Event> log;
    nlohmann::json trace;  // half the instances continue a trace
    if (seed % 2) trace = {{"trace_id", std::string(32, 'a')}, {"parent_id", std::string(16, 'b')}};
    Event created = Instance::CreatedEvent("i" + std::to_string(seed), def,
                                           {{"title", "t\"\n\u00e9"}, {"n", seed}}, trace);
    created.seq = 1;
    created.at_ms = 1000;
    log.push_back(created);
    Instance inst;
    ASSERT_TRUE(inst.Apply(created).ok());
    for (int tries = 0; tries < 200 && log.size() < 40; ++tries) {
      Event e;
      e.seq = inst.last_seq() + 1;
      e.at_ms = 1000 + e.seq * 7;
      if (pick(4) == 0) {
        e.type = saga_types[pick(saga_types.size())];
        e.data = {{"reason", "r" + std::to_string(pick(100))}};
      } else {
        e.type = step_types[pick(step_types.size())];
        e.step = def.steps[pick(def.steps.size())].name;
        const char* odd[] = {"", "\"q\"\t\\", "caf\xc3\xa9"};  // some need escaping
        e.data = {{"error", "e" + std::to_string(pick(100)) + odd[pick(3)]},
                  {"key", "k"},
                  {"args_hash", "h"},
                  {"result", {{"ref", std::to_string(pick(1000))}}},
                  {"external_ref", "x"}};
        if (pick(3) == 0) e.data["retry_at"] = 5000 + static_cast<int64_t>(pick(1000));
        if (e.type == "reconciled" && pick(2)) e.data["phase"] = "compensation";
      }
      Instance next = inst;
      if (!next.Apply(e).ok()) continue;  // the machines refuse it: not a valid history
      inst = next;
      log.push_back(e);
      ++transitions;
      // Crash here: replay the serialized prefix.
      std::vector<Event> serialized;
      for (const Event& x : log) serialized.push_back(RoundTrip(x));
      auto replayed = Instance::Replay(created.data["id"], serialized);
      ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
      replayed->set_version(inst.version());  // the store's count, not the log's
      ASSERT_EQ(replayed->ToJson(), inst.ToJson()) << "seed " << seed << " at seq " << e.seq;
      // The snapshot text a transition writes, with the texts kept from the
      // copies before it, is the tree's, byte for byte.
      inst.set_version(static_cast<uint64_t>(e.seq));
      ASSERT_EQ(inst.SnapshotText(), DumpJson(inst.ToJson()))
          << "seed " << seed << " at seq " << e.seq;
    }
  }
  EXPECT_GT(transitions, 1000);  // the walk really explores
}

// A downstream's text that is not UTF-8 is written replaced (U+FFFD), in the
// snapshot text as in the tree's.
TEST(SnapshotTextTest, BytesThatAreNotUtf8AreReplacedAsTheTreeWouldBe) {
  Event created = Instance::CreatedEvent("i", IncidentResponse(), {{"title", "t"}});
  created.seq = 1;
  Instance inst;
  ASSERT_TRUE(inst.Apply(created).ok());
  Event e;
  e.seq = 2;
  e.type = "started";
  e.step = inst.step(0).name;
  ASSERT_TRUE(inst.Apply(e).ok());
  e.seq = 3;
  e.type = "outcome_unknown";
  e.data = {{"error", "bad \xff byte"}};
  ASSERT_TRUE(inst.Apply(e).ok());
  std::string text = inst.SnapshotText();
  EXPECT_EQ(text, DumpJson(inst.ToJson()));
  EXPECT_NE(text.find("bad \xef\xbf\xbd byte"), std::string::npos);
}

// Found by the simulator (seed 5472): a send that was "not executed" after
// an earlier send's outcome was unknown says nothing about that one; only
// an answer, a commit, a refusal or an operator clears the doubt.
TEST(ReplayTest, AStepStaysInDoubtUntilSomethingSettlesIt) {
  auto step = [](int64_t seq, const char* type, nlohmann::json data = nlohmann::json::object()) {
    Event e;
    e.seq = seq;
    e.at_ms = seq;
    e.type = type;
    e.step = "a";
    e.data = std::move(data);
    return e;
  };
  Event created;
  created.seq = 1;
  created.type = "instance_created";
  created.data = {{"id", "i"},
                  {"saga", "s"},
                  {"version", 1},
                  {"input", nlohmann::json::object()},
                  {"steps", {"a"}}};
  std::vector<Event> log = {created, step(2, "started"), step(3, "outcome_unknown"),
                            step(4, "started")};
  auto inst = Instance::Replay("i", log);
  ASSERT_TRUE(inst.ok()) << inst.status().ToString();
  EXPECT_TRUE(inst->step(0).forward_in_doubt);  // the re-send does not clear it
  log.push_back(step(5, "outcome_unknown"));
  log.push_back(step(6, "not_executed", {{"error", "confirmed not executed"}}));
  inst = Instance::Replay("i", log);
  ASSERT_TRUE(inst.ok()) << inst.status().ToString();
  EXPECT_FALSE(inst->step(0).forward_in_doubt);  // an answer settled it
  EXPECT_EQ(inst->step(0).status(), StepStatus::kPlanned);
  // Seed 19100: a send after one whose outcome was never recorded.
  log.push_back(step(7, "started"));
  log.push_back(step(8, "started"));
  inst = Instance::Replay("i", log);
  ASSERT_TRUE(inst.ok()) << inst.status().ToString();
  EXPECT_TRUE(inst->step(0).forward_in_doubt);
}

// Found by fuzz_replay: an event whose data is a string made Apply throw.
TEST(ReplayTest, AnEventWhoseDataIsNotAnObjectIsRefusedNotThrown) {
  nlohmann::json log = nlohmann::json::parse(R"([
    {"seq":1,"at":1,"type":"instance_created","data":{"id":"i","saga":"s","version":1,
     "input":{},"steps":["a"]}},
    {"seq":2,"at":2,"type":"started","step":"a","data":"saga_compensating"}])");
  std::vector<Event> events;
  for (const auto& j : log) events.push_back(*Event::FromJson(j));
  auto inst = Instance::Replay("i", events);
  ASSERT_FALSE(inst.ok());
  EXPECT_NE(inst.status().message().find("data must be a JSON object"), std::string::npos);
}

// Numbers out of range (fuzz_replay: converting 1e300 to an integer is
// undefined behaviour) are refused, not converted.
TEST(ReplayTest, NumbersOutOfRangeAreRefusedNotConverted) {
  EXPECT_FALSE(Event::FromJson({{"seq", 1e300}, {"at", 1}, {"type", "x"}}).ok());
  EXPECT_FALSE(Event::FromJson({{"seq", 1}, {"at", -1e300}, {"type", "x"}}).ok());
  EXPECT_FALSE(Event::FromJson({{"seq", 1.5}, {"at", 1}, {"type", "x"}}).ok());
  EXPECT_TRUE(Event::FromJson({{"seq", 2.0}, {"at", 1}, {"type", "x"}}).ok());
  auto replay = [](const char* text) {
    std::vector<Event> events;
    for (const auto& j : nlohmann::json::parse(text)) events.push_back(*Event::FromJson(j));
    return Instance::Replay("i", events);
  };
  EXPECT_FALSE(replay(R"([{"seq":1,"at":1,"type":"instance_created","data":{"id":"i","saga":"s",
      "version":1e300,"input":{},"steps":["a"]}}])")
                   .ok());
  EXPECT_FALSE(replay(R"([{"seq":1,"at":1,"type":"instance_created","data":{"id":"i","saga":"s",
      "version":1,"input":{},"steps":["a"]}},
      {"seq":2,"at":2,"type":"started","step":"a","data":{"retry_at":1e300}}])")
                   .ok());
  EXPECT_TRUE(replay(R"([{"seq":1,"at":1,"type":"instance_created","data":{"id":"i","saga":"s",
      "version":1,"input":{},"steps":["a"]}},
      {"seq":2,"at":2,"type":"started","step":"a","data":{"retry_at":5}}])")
                  .ok());
}

}  // namespace
}  // namespace sagad
