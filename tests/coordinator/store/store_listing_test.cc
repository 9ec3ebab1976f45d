// The listing's filters that every store answers from an index:
// creation-time bounds (ranges of ids: ids sort by creation), alone, with an
// indexed condition, and across pages.
#include "tests/coordinator/store/store_test_fixture.h"

namespace sagad {
namespace {

// An id as the engine makes them, created at `ms`.
std::string IdAt(int64_t ms, int n) {
  char tail[20];
  snprintf(tail, sizeof tail, "-%016x", n);
  return IdFloor(ms) + tail;
}

std::vector<std::string> Ids(const StatusOr<InstancePage>& page) {
  std::vector<std::string> out;
  if (page.ok())
    for (const auto& j : page->instances) out.push_back(j.value("id", ""));
  return out;
}

TEST_F(StoreTest, CreationTimeBoundsAreRangesOfIdsNewestFirst) {
  const int64_t t0 = 1795000000000;
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    ids.push_back(IdAt(t0 + i * 1000, i));
    nlohmann::json snap = Snap(ids.back(), 1, i % 2 ? "COMPLETED" : "RUNNING");
    ASSERT_TRUE(store_->CreateInstance(snap, {Ev(1, "c")}, nullptr, {}, nullptr).ok());
  }
  EXPECT_EQ(CreatedAtOfId(ids[2]), t0 + 2000);
  InstanceFilter f;
  f.created_after = t0 + 2000;  // strictly after: 3, 4, 5
  EXPECT_EQ(Ids(store_->ListInstances(f, 10, "")),
            (std::vector<std::string>{ids[5], ids[4], ids[3]}));
  f = InstanceFilter();
  f.created_before = t0 + 2000;  // strictly before: 1, 0
  EXPECT_EQ(Ids(store_->ListInstances(f, 10, "")), (std::vector<std::string>{ids[1], ids[0]}));
  f.created_after = t0;  // and after 0: 1
  EXPECT_EQ(Ids(store_->ListInstances(f, 10, "")), (std::vector<std::string>{ids[1]}));
  // With an indexed condition, and page by page.
  f = InstanceFilter();
  f.status = "RUNNING";
  f.created_after = t0 - 1;
  f.created_before = t0 + 4500;
  auto p1 = store_->ListInstances(f, 1, "");
  EXPECT_EQ(Ids(p1), (std::vector<std::string>{ids[4]}));
  ASSERT_FALSE(p1->next_cursor.empty());
  auto p2 = store_->ListInstances(f, 5, p1->next_cursor);
  EXPECT_EQ(Ids(p2), (std::vector<std::string>{ids[2], ids[0]}));
  EXPECT_TRUE(p2->next_cursor.empty());
  f.created_after = t0 + 10000;  // after everything
  EXPECT_TRUE(Ids(store_->ListInstances(f, 10, "")).empty());
}

}  // namespace
}  // namespace sagad
