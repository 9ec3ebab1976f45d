// A store without space (a tiny LMDB map): writes answer 503 with
// Retry-After and say the store is full, /readyz is 503, nothing is
// half-created; with room again (a restart with a larger map) every
// instance resumes by itself, each effect once.
#include <gtest/gtest.h>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

using nlohmann::json;

TEST(StorageFullTest, AFullStoreAnswers503UntilThereIsRoomThenEverythingResumes) {
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  sagad.Configure({{"lmdb_map_size_mb", 1}});
  ASSERT_GT(sagad.Start(), 0);
  std::vector<std::string> ids;
  Reply full;
  // One saga at a time (?wait): when a write is refused, no other write is in
  // flight that could succeed in a corner of the map and clear the state.
  for (int i = 0; i < 5000 && full.status != 503; ++i) {
    json in = OrderInput();
    in["pad"] = std::string(2000, 'x');  // fills the map sooner
    Reply r = sagad.Submit("order_fulfilment", in, 10, "k-" + std::to_string(i));
    if (r.status == 200 || r.status == 201)
      ids.push_back(r.body["id"]);
    else
      full = r;
  }
  ASSERT_EQ(full.status, 503) << full.raw;
  EXPECT_EQ(full.header("Retry-After"), "1");
  EXPECT_NE(full.body.value("detail", "").find("the store is full"), std::string::npos) << full.raw;
  // In the operator's terms only: no library text.
  EXPECT_EQ(full.body.value("detail", "").find("MDB_"), std::string::npos) << full.raw;
  EXPECT_EQ(full.body.value("detail", "").find("mdb_txn"), std::string::npos) << full.raw;
  Reply ready = sagad.Get("/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_NE(ready.body.value("detail", "").find("full"), std::string::npos) << ready.raw;
  EXPECT_EQ(sagad.Get("/healthz").status, 200);
  ASSERT_FALSE(ids.empty());
  // Room again: restart with a larger map.
  EXPECT_EQ(sagad.Terminate(), 0);
  sagad.Configure({{"lmdb_map_size_mb", 64}});
  ASSERT_GT(sagad.Start(), 0);
  EXPECT_TRUE(WaitFor([&] { return sagad.Get("/readyz").status == 200; }));
  for (const auto& id : ids)
    EXPECT_EQ(sagad.WaitStatus(id, "COMPLETED")["status"], "COMPLETED") << id;
  // The refused submission left nothing: its key is free, not "in progress".
  std::string refused_key = "k-" + std::to_string(ids.size());
  json in = OrderInput();
  in["pad"] = std::string(2000, 'x');
  Reply again = sagad.Submit("order_fulfilment", in, 10, refused_key);
  EXPECT_EQ(again.status, 200) << again.raw;
  EXPECT_NE(again.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(RepeatedEffects(downstream), "");
}

}  // namespace
}  // namespace sagad::testing
