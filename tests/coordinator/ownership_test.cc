// Ownership over a real LMDB store: two Ownership objects on one store are
// two coordinator processes.
#include "coordinator/ownership.h"

#include <gtest/gtest.h>

#include "tests/testing/store_fixture.h"

namespace sagad {
namespace {

class OwnershipTest : public testing::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    for (const char* id : {"a", "b"})
      ASSERT_TRUE(store_
                      ->CreateInstance({{"id", id},
                                        {"version", 1},
                                        {"status", "RUNNING"},
                                        {"saga", "s"}},
                                       {}, nullptr, {}, nullptr)
                      .ok());
  }
  static constexpr int64_t kLease = 3000;
};

TEST_F(OwnershipTest, OwnerNamesTheCoordinatorAndAnIncarnation) {
  Ownership one(*store_, clock_, "east", kLease), two(*store_, clock_, "east", kLease);
  EXPECT_EQ(one.owner().rfind("east/", 0), 0u);
  EXPECT_NE(one.owner(), two.owner());
}

TEST_F(OwnershipTest, TakesAFreeLeaseOnceAndTheTokenIsItsGeneration) {
  Ownership own(*store_, clock_, "east", kLease);
  EXPECT_EQ(own.Token("a"), 0u);
  EXPECT_EQ(own.Acquire("a"), Ownership::Take::kTaken);
  EXPECT_EQ(own.Acquire("a"), Ownership::Take::kAlreadyHeld);
  ASSERT_TRUE(own.Held("a"));
  EXPECT_EQ(own.Token("a"), own.Held("a")->generation);
  EXPECT_GT(own.Token("a"), 0u);
  EXPECT_EQ(own.Held("a")->expires_at, clock_.NowMillis() + kLease);
}

TEST_F(OwnershipTest, ALiveOtherCoordinatorIsRefusedUntilItsLeaseExpires) {
  Ownership east(*store_, clock_, "east", kLease), west(*store_, clock_, "west", kLease);
  ASSERT_EQ(east.Acquire("a"), Ownership::Take::kTaken);
  EXPECT_EQ(west.Acquire("a"), Ownership::Take::kRefused);
  EXPECT_FALSE(west.Held("a"));
  clock_.Advance(kLease + 1);
  ASSERT_EQ(west.Acquire("a"), Ownership::Take::kTaken);
  EXPECT_GT(west.Token("a"), east.Token("a"));  // a new owner, a new generation
}

TEST_F(OwnershipTest, ARestartTakesItsPredecessorsLeasesAtOnce) {
  Ownership before(*store_, clock_, "east", kLease);
  ASSERT_EQ(before.AcquireAll({"a", "b"}), 2u);
  Ownership after(*store_, clock_, "east", kLease);  // same id, new incarnation
  EXPECT_EQ(after.AcquireAll({"a", "b"}), 2u);
  EXPECT_GT(after.Token("a"), before.Token("a"));
  Ownership other(*store_, clock_, "west", kLease);
  EXPECT_EQ(other.AcquireAll({"a", "b"}), 0u);
}

TEST_F(OwnershipTest, RenewExtendsWhatIsHeldAndReportsWhatWasTaken) {
  Ownership east(*store_, clock_, "east", kLease), west(*store_, clock_, "west", kLease);
  ASSERT_EQ(east.AcquireAll({"a", "b"}), 2u);
  clock_.Advance(kLease - 100);
  auto lost = east.Renew();
  ASSERT_TRUE(lost.ok());
  EXPECT_TRUE(lost->empty());
  EXPECT_EQ(east.Held("a")->expires_at, clock_.NowMillis() + kLease);
  clock_.Advance(kLease - 100);  // still within the renewed lease
  EXPECT_EQ(west.Acquire("a"), Ownership::Take::kRefused);
  clock_.Advance(200);  // east paused past its lease: west takes "a"
  ASSERT_EQ(west.Acquire("a"), Ownership::Take::kTaken);
  lost = east.Renew();
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(*lost, std::vector<std::string>{"a"});
  EXPECT_FALSE(east.Held("a"));
  EXPECT_TRUE(east.Held("b"));
  EXPECT_EQ(east.size(), 1u);
}

TEST_F(OwnershipTest, AdoptAndReleaseTouchNoStore) {
  Ownership own(*store_, clock_, "east", kLease);
  Lease first = own.FirstLease();
  EXPECT_EQ(first.owner, own.owner());
  EXPECT_EQ(first.generation, 1u);
  own.Adopt("new", first);
  EXPECT_EQ(own.Token("new"), 1u);
  own.Release("new");
  EXPECT_FALSE(own.Held("new"));
}

}  // namespace
}  // namespace sagad
