// Issue 21.5, on each store (run again with SAGAD_TEST_STORE=postgres): a
// U+0000 in what the API receives is refused with 400 and never disturbs
// other writes; one in a downstream reply is recorded escaped. Real sagad,
// real downstreams, real PostgreSQL for the second run.
#include <gtest/gtest.h>

#include <future>

#include "tests/testing/cluster.h"
#include "tests/testing/rogue_downstream.h"

namespace sagad::testing {
namespace {

using nlohmann::json;

class PromiseTest : public ::testing::Test {
 protected:
  TempDir dir_;
  Downstream downstream_;
};

TEST_F(PromiseTest, NulIsRefusedAtTheApiWithoutFailingTheWritesBesideIt) {
  Coordinator sagad(downstream_, dir_.path() + "/data");
  ASSERT_GT(sagad.Start(), 0);
  json bad = OrderInput();
  bad["customer"] = std::string("a\0b", 3);
  Reply r = sagad.Submit("order_fulfilment", bad, 0);
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_NE(r.body.value("detail", "").find("/input/customer"), std::string::npos) << r.raw;
  // 40 bad submissions beside 40 good ones: every good one goes through.
  std::vector<std::future<int>> bad_ones, good_ones;
  for (int i = 0; i < 40; ++i) {
    bad_ones.push_back(std::async(std::launch::async, [&, i] {
      return sagad.Submit("order_fulfilment", bad, 0, "bad-" + std::to_string(i)).status;
    }));
    good_ones.push_back(std::async(std::launch::async, [&, i] {
      return sagad.Submit("order_fulfilment", OrderInput(), 0, "good-" + std::to_string(i)).status;
    }));
  }
  for (auto& f : bad_ones) EXPECT_EQ(f.get(), 400);
  for (auto& f : good_ones) EXPECT_EQ(f.get(), 201);
  // The same for an operator's text and a key.
  std::string id = sagad.Submit("order_fulfilment", OrderInput(), 10).body.value("id", "");
  ASSERT_FALSE(id.empty());
  Reply cancel = sagad.Post("/v1/instances/" + id + "/cancel", {{"reason", std::string("x\0", 2)}});
  EXPECT_EQ(cancel.status, 400) << cancel.raw;
  Reply keyed = sagad.Post("/v1/sagas/order_fulfilment/instances",
                           {{"input", {{std::string("k\0", 2), 1}}}});
  EXPECT_EQ(keyed.status, 400) << keyed.raw;
  EXPECT_EQ(sagad.Terminate(), 0);
}

TEST_F(PromiseTest, NulInADownstreamReplyIsRecordedEscaped) {
  RogueDownstream rogue([](const RawRequest& r) {
    if (r.path.rfind("/operations/", 0) == 0) return RawAnswer(404, "{}");
    return RawAnswer(201, R"({"ref":"R1","note":"a\u0000b"})");
  });
  Coordinator sagad(downstream_, dir_.path() + "/data", {{"payments", {{"base_url", rogue.url()}}}});
  ASSERT_GT(sagad.Start(), 0);
  Reply r = sagad.Submit("order_fulfilment", OrderInput(), 10);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["status"], "COMPLETED") << r.raw;
  EXPECT_EQ(r.body["steps"][1]["result"].value("note", ""), "a\\x00b") << r.raw;
  EXPECT_EQ(rogue.Count("/charges"), 1);  // recorded at once: no loop, no re-send
  EXPECT_EQ(sagad.Terminate(), 0);
}

}  // namespace
}  // namespace sagad::testing
