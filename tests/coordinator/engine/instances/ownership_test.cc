// Ownership over a real LMDB store: two Ownership objects on one store are
// two coordinator processes.
#include "coordinator/engine/instances/ownership.h"

#include <gtest/gtest.h>

#include "tests/testing/forwarding_store.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/store_fixture.h"

namespace sagad {
namespace {

class OwnershipTest : public testing::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    for (const char* id : {"a", "b"})
      ASSERT_TRUE(
          store_
              ->CreateInstance({{"id", id}, {"version", 1}, {"status", "RUNNING"}, {"saga", "s"}},
                               {}, nullptr, {}, nullptr)
              .ok());
  }
  static constexpr int64_t kLease = 3000;
};

// A store whose lease transactions wait `wait_ms` for the writer lock
// (another process holds it, paused) before they run.
class WaitingLeaseStore : public testing::ForwardingStore {
 public:
  WaitingLeaseStore(Store& real, testing::ManualClock& clock, int64_t wait_ms)
      : ForwardingStore(real), clock_(clock), wait_ms_(wait_ms) {}
  StatusOr<Lease> AcquireLease(const std::string& id, const std::string& owner, const Clock& clock,
                               int64_t ttl_ms, const std::string& successor_of) override {
    clock_.Advance(wait_ms_);
    return real_.AcquireLease(id, owner, clock, ttl_ms, successor_of);
  }

 private:
  testing::ManualClock& clock_;
  const int64_t wait_ms_;
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

// Regression: the heartbeat's renewal raced the final commit of an
// instance (which releases its lease) and logged "lease lost" for it.
TEST_F(OwnershipTest, ALeaseReleasedByItsInstancesLastCommitIsNotReportedLost) {
  Ownership east(*store_, clock_, "east", kLease);
  ASSERT_EQ(east.AcquireAll({"a", "b"}), 2u);
  auto lease = east.Held("a");
  ASSERT_TRUE(lease);
  Status done =
      store_->Commit("a", 1, {{"id", "a"}, {"version", 2}, {"status", "COMPLETED"}, {"saga", "s"}},
                     {}, {}, {}, &*lease);
  ASSERT_TRUE(done.ok()) << done.ToString();
  auto lost = east.Renew();  // before the engine called Release("a")
  ASSERT_TRUE(lost.ok());
  EXPECT_TRUE(lost->empty());
  EXPECT_FALSE(east.Held("a"));
  EXPECT_TRUE(east.Held("b"));
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

// Regression: B waited longer than a lease for the writer lock while A (the
// holder) was paused. The lease B wrote must be counted from inside its
// transaction (else it is born expired and A takes it back while B sends),
// and neither may send on what it merely remembers.
// A creation's continuation that runs after its first lease ran out, went to
// another process and came back keeps the later lease (the token never
// goes down; Adopt would abort).
TEST_F(OwnershipTest, AFirstLeaseAdoptedLateLeavesTheLaterOneHeld) {
  Ownership east(*store_, clock_, "east", kLease), west(*store_, clock_, "west", kLease);
  const Lease first = east.FirstLease();  // as written with a creation
  ASSERT_TRUE(store_->AcquireLease("a", east.owner(), clock_, kLease, "").ok());
  clock_.Advance(kLease + 1);
  ASSERT_EQ(west.Acquire("a"), Ownership::Take::kTaken);
  clock_.Advance(kLease + 1);
  ASSERT_EQ(east.Acquire("a"), Ownership::Take::kTaken);  // back to east
  const uint64_t later = east.Token("a");
  ASSERT_GT(later, first.generation);
  east.AdoptFirst("a", first);  // the creation's continuation, late
  EXPECT_EQ(east.Token("a"), later);
  east.AdoptFirst("b", first);  // on time: taken
  EXPECT_EQ(east.Token("b"), first.generation);
}

TEST_F(OwnershipTest, ALeaseGrantedAfterALongWaitIsNotBornExpiredAndNobodySendsOnAStaleOne) {
  Ownership a(*store_, clock_, "east", kLease);
  ASSERT_EQ(a.Acquire("a"), Ownership::Take::kTaken);
  WaitingLeaseStore waiting(*store_, clock_, 2 * kLease);
  Ownership b(waiting, clock_, "west", kLease);
  ASSERT_EQ(b.Acquire("a"), Ownership::Take::kTaken);  // A's expired meanwhile
  // As stored, B's lease runs a whole lease from the moment it was written.
  EXPECT_EQ(store_->GetLease("a")->expires_at, clock_.NowMillis() + kLease);
  Ownership c(*store_, clock_, "north", kLease);
  EXPECT_EQ(c.Acquire("a"), Ownership::Take::kRefused);
  // A, continued, still remembers its lease: it must not send on it.
  EXPECT_EQ(a.ReadyToSend("a").code(), StatusCode::kLeaseLost);
  EXPECT_FALSE(a.Held("a"));
  // B believes no more than the time read before it asked: its lease is
  // renewed before it sends, then it may.
  EXPECT_LE(b.Held("a")->expires_at, clock_.NowMillis());
  EXPECT_TRUE(b.ReadyToSend("a").ok());
  EXPECT_EQ(b.Held("a")->expires_at, clock_.NowMillis() + kLease);
}

TEST_F(OwnershipTest, ASendNeedsAThirdOfTheLeaseLeftAndRenewsBelowIt) {
  Ownership own(*store_, clock_, "east", kLease);
  ASSERT_EQ(own.Acquire("a"), Ownership::Take::kTaken);
  const uint64_t commits = store_->SyncedCommits();
  clock_.Advance(kLease - kLease / 3);  // exactly a third left: no renewal
  EXPECT_TRUE(own.ReadyToSend("a").ok());
  EXPECT_EQ(store_->SyncedCommits(), commits);
  clock_.Advance(1);  // less than a third: renewed first
  EXPECT_TRUE(own.ReadyToSend("a").ok());
  EXPECT_EQ(store_->SyncedCommits(), commits + 1);
  EXPECT_EQ(store_->GetLease("a")->expires_at, clock_.NowMillis() + kLease);
  EXPECT_EQ(own.ReadyToSend("b").code(), StatusCode::kLeaseLost);  // never held
}

TEST_F(OwnershipTest, ARenewalThatTakesLongerThanTheMarginDoesNotLetASendGo) {
  // The renewal itself waits 2.5 lease thirds: what is left after it, by
  // the time read before it, is under a third.
  class SlowRenewal : public testing::ForwardingStore {
   public:
    SlowRenewal(Store& real, testing::ManualClock& clock) : ForwardingStore(real), clock_(clock) {}
    StatusOr<std::vector<std::string>> RenewLeases(const std::string& owner,
                                                   const std::vector<std::string>& ids,
                                                   const Clock& clock, int64_t ttl_ms) override {
      auto r = real_.RenewLeases(owner, ids, clock, ttl_ms);
      clock_.Advance(ttl_ms * 5 / 6);
      return r;
    }
    testing::ManualClock& clock_;
  } slow(*store_, clock_);
  Ownership own(slow, clock_, "east", kLease);
  ASSERT_EQ(own.Acquire("a"), Ownership::Take::kTaken);
  clock_.Advance(kLease);
  EXPECT_EQ(own.ReadyToSend("a").code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace sagad
