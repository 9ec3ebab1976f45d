// Driver over a real LMDB store, InstanceRepository, Ownership and RunTable,
// with real worker threads and timers; time in records comes from a manual
// clock. The downstream is a ScriptedDownstream (the boundary, not the thing
// under test), which checks at each request that its STARTED record is
// already durable. Every wait is on a condition with a deadline.
#include "coordinator/engine/driver/driver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <thread>

#include "coordinator/engine/owners/asio_executor.h"
#include "examples/examples.h"
#include "tests/testing/failing_reads_store.h"
#include "tests/testing/scripted_downstream.h"
#include "tests/testing/store_fixture.h"

namespace sagad {
namespace {

using testing::ScriptedDownstream;
using testing::WaitFor;

// A store that parks every commit of instance `held` that carries an event
// of type `type` until Release(), blocking (Commit) or not (CommitAsync):
// what the engine does meanwhile shows whether a thread waits for it.
class HoldingStore : public testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  Status Commit(const std::string& id, uint64_t expected_version, const nlohmann::json& snapshot,
                const std::vector<Event>& events, const std::vector<OperationRecord>& operations,
                const std::vector<nlohmann::json>& outbox, const Lease* lease) override {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (Holds(id, events)) {
        ++parked_;
        cv_.wait(l, [&] { return released_; });
      }
    }
    return real_.Commit(id, expected_version, snapshot, events, operations, outbox, lease);
  }
  void CommitAsync(std::shared_ptr<const TransitionWrite> w,
                   std::function<void(Status)> done) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (Holds(w->id, w->events)) {
        ++parked_;
        later_.push_back([this, w, done] { real_.CommitAsync(w, done); });
        return;
      }
    }
    real_.CommitAsync(std::move(w), std::move(done));
  }
  void Hold(const std::string& id, const std::string& type) {
    std::lock_guard<std::mutex> l(mu_);
    held_ = id;
    type_ = type;
  }
  int parked() {
    std::lock_guard<std::mutex> l(mu_);
    return parked_;
  }
  void Release() {
    std::vector<std::function<void()>> later;
    {
      std::lock_guard<std::mutex> l(mu_);
      released_ = true;
      later.swap(later_);
    }
    cv_.notify_all();
    for (auto& f : later) f();
  }

 private:
  bool Holds(const std::string& id, const std::vector<Event>& events) {
    if (released_ || id != held_) return false;
    for (const Event& e : events)
      if (e.type == type_) return true;
    return false;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::string held_, type_;
  bool released_ = false;
  int parked_ = 0;
  std::vector<std::function<void()>> later_;
};

class DriverTest : public testing::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    downstream_ = std::make_unique<ScriptedDownstream>(
        *store_, std::vector<std::string>{"inventory", "payments", "shipping", "airline", "hotel",
                                          "cars", "mail"});
    reads_ = std::make_unique<testing::FailingReadsStore>(*store_);
    // As the engine's: what follows a commit runs on its owner.
    repo_ = std::make_unique<InstanceRepository>(*reads_, clock_, nullptr, &executor_);
    east_ = std::make_unique<Ownership>(*store_, clock_, "east", 3000);
    gates_ = std::make_unique<ServiceGates>(*downstream_, clock_);
    driver_ =
        std::make_unique<Driver>(*downstream_, defs_, *repo_, *east_, runs_, recovery_, metrics_,
                                 *gates_, clock_, SystemRandom::Shared(), executor_, 4);
  }
  void TearDown() override {
    runs_.StopAndWait();
    executor_.Shutdown();
    CloseStore();
  }

  // A new instance as Submissions writes it, its lease held by `owner`.
  void Create(const SagaDefinition& def, const std::string& id, const nlohmann::json& input,
              Ownership& owner) {
    Instance inst;
    Event created = Instance::CreatedEvent(id, def, input);
    created.seq = 1;
    created.at_ms = clock_.NowMillis();
    ASSERT_TRUE(inst.Apply(created).ok());
    inst.set_version(1);
    Lease lease = owner.FirstLease();
    ASSERT_TRUE(repo_->Create(inst, {created}, {}, nullptr, &lease).ok());
    owner.Adopt(id, lease);
  }
  static nlohmann::json Order() {
    return {{"sku", "A"},        {"qty", 1},        {"amount", 5},
            {"currency", "EUR"}, {"customer", "c"}, {"address", "x"}};
  }
  std::string Status(const std::string& id) {
    auto j = store_->GetInstance(id);
    return j.ok() ? j->value("status", "") : j.status().ToString();
  }
  bool Reaches(const std::string& id, const std::string& status) {
    return WaitFor([&] { return Status(id) == status; });
  }
  // See the tests that call it, at the end of this file.
  void NoWorkerWaitsFor(const char* type, Outcome first);
  std::vector<std::string> Paths() {
    std::vector<std::string> out;
    for (const auto& c : downstream_->Calls()) out.push_back(c.path);
    return out;
  }

  std::unique_ptr<ScriptedDownstream> downstream_;
  std::unique_ptr<testing::FailingReadsStore> reads_;  // the store, as the repository sees it
  DefinitionRegistry defs_;
  std::unique_ptr<InstanceRepository> repo_;
  std::unique_ptr<Ownership> east_;
  RunTable runs_;
  RecoveryTracker recovery_;
  EngineMetrics metrics_;
  std::unique_ptr<ServiceGates> gates_;
  AsioExecutor executor_{4};
  std::unique_ptr<Driver> driver_;
};

TEST_F(DriverTest, RunsAPlainListToItsEndOneDurableStepAtATime) {
  ASSERT_TRUE(defs_.Register(OrderFulfilment()).ok());
  Create(OrderFulfilment(), "o1", Order(), *east_);
  driver_->Schedule("o1");
  ASSERT_TRUE(Reaches("o1", "COMPLETED")) << Status("o1");
  EXPECT_EQ(Paths(), std::vector<std::string>({"/reservations", "/charges", "/shipments"}));
  EXPECT_EQ(downstream_->DurableBeforeSend(), std::vector<bool>({true, true, true}));
  for (const auto& c : downstream_->Calls()) EXPECT_EQ(c.fencing_token, east_->Token("o1"));
  EXPECT_TRUE(WaitFor([&] { return runs_.Busy() == 0; }));  // nothing left under way
}

TEST_F(DriverTest, ADefiniteFailureUndoesTheCommittedStepsInReverse) {
  ASSERT_TRUE(defs_.Register(OrderFulfilment()).ok());
  downstream_->answers = {Outcome::kCommitted, Outcome::kCommitted, Outcome::kFailed};
  Create(OrderFulfilment(), "o1", Order(), *east_);
  driver_->Schedule("o1");
  ASSERT_TRUE(Reaches("o1", "COMPENSATED")) << Status("o1");
  EXPECT_EQ(Paths(), std::vector<std::string>({"/reservations", "/charges", "/shipments",
                                               "/charges/R-charge_payment/refund",
                                               "/reservations/R-reserve_inventory/release"}));
  EXPECT_EQ(downstream_->DurableBeforeSend(), std::vector<bool>(5, true));
}

TEST_F(DriverTest, ARetryWaitsOnATimerThenGoesOnWithTheSameKey) {
  ASSERT_TRUE(defs_.Register(OrderFulfilment()).ok());
  downstream_->answers = {Outcome::kNotExecuted};  // 429-like: nothing was done
  Create(OrderFulfilment(), "o1", Order(), *east_);
  driver_->Schedule("o1");
  // The re-send's time is recorded (the outcome's commit comes after the
  // call: wait for it, not for the call, or the clock could move before the
  // time is taken from it and the re-send would never be due).
  // A full-jitter backoff may come out as 0 ms (due at once): then the
  // re-send may already be out before the time is seen.
  int64_t due = 0;
  ASSERT_TRUE(WaitFor([&] {
    auto j = store_->GetInstance("o1");
    if (!j.ok()) return false;
    due = (*j)["steps"][0].value("next_retry_at", int64_t(0));
    return due > 0 || downstream_->Calls().size() > 1;
  }));
  if (due > clock_.NowMillis()) {
    EXPECT_EQ(downstream_->Calls().size(), 1u);  // not due yet: nothing re-sent
    // The manual clock reaches it; the timer, set in real time for the
    // backoff, fires and finds it due.
    clock_.Advance(due - clock_.NowMillis() + 1);
  }
  ASSERT_TRUE(Reaches("o1", "COMPLETED")) << Status("o1");
  auto calls = downstream_->Calls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[0].idempotency_key, calls[1].idempotency_key);
  EXPECT_EQ(calls[1].attempt, 2);
}

TEST_F(DriverTest, LeavesAnInstanceAnotherLiveProcessOwnsAloneThenTakesItOverAfterExpiry) {
  ASSERT_TRUE(defs_.Register(OrderFulfilment()).ok());
  Ownership west(*store_, clock_, "west", 3000);
  Create(OrderFulfilment(), "o1", Order(), west);
  driver_->Schedule("o1");
  ASSERT_TRUE(WaitFor([&] { return runs_.Busy() == 0; }));
  EXPECT_TRUE(downstream_->Calls().empty());
  EXPECT_EQ(Status("o1"), "RUNNING");
  EXPECT_FALSE(east_->Held("o1"));
  // West stops heartbeating: once its lease expired, east takes over with a
  // new generation and every request carries it.
  clock_.Advance(3001);
  driver_->Schedule("o1");
  ASSERT_TRUE(Reaches("o1", "COMPLETED")) << Status("o1");
  auto calls = downstream_->Calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_GT(calls[0].fencing_token, west.Token("o1"));
}

// Storage away for a moment (a database restart) when the driver reads an
// instance it owns: it tries again a second later; nothing else would ever
// drive the instance again before the next process start.
TEST_F(DriverTest, AnOwnedInstanceWhoseReadFailsIsTriedAgainNotDropped) {
  ASSERT_TRUE(defs_.Register(OrderFulfilment()).ok());
  Create(OrderFulfilment(), "o1", Order(), *east_);
  repo_->Evict("o1");  // not cached, as after a restart: the driver reads it
  reads_->failures = 2;
  driver_->Schedule("o1");
  ASSERT_TRUE(Reaches("o1", "COMPLETED")) << Status("o1");
  EXPECT_EQ(reads_->refused.load(), 2);
  EXPECT_EQ(downstream_->Calls().size(), 3u);
}

TEST_F(DriverTest, ASagaVersionNotRegisteredGoesToReviewWithoutACall) {
  Create(OrderFulfilment(), "o1", Order(), *east_);  // nothing registered
  driver_->Schedule("o1");
  ASSERT_TRUE(Reaches("o1", "NEEDS_REVIEW")) << Status("o1");
  EXPECT_TRUE(downstream_->Calls().empty());
}

TEST_F(DriverTest, APassedSagaDeadlineTurnsItBackBeforeAnyCall) {
  SagaDefinition def = OrderFulfilment();
  def.deadline_ms = 1000;
  ASSERT_TRUE(defs_.Register(def).ok());
  Create(def, "o1", Order(), *east_);
  clock_.Advance(1001);
  driver_->Schedule("o1");
  ASSERT_TRUE(Reaches("o1", "COMPENSATED")) << Status("o1");
  EXPECT_TRUE(downstream_->Calls().empty());
}

TEST_F(DriverTest, AGraphRunsItsRootsAtOnceAndItsJoinAfterAll) {
  ASSERT_TRUE(defs_.Register(TripBooking()).ok());
  // Each booking waits (up to 5 s) until all three are in flight: the test
  // passes only if the driver sends them concurrently. The replies come on
  // threads of their own, as from an event loop: the instance's owner thread
  // sends the three and waits for none.
  downstream_->threaded = true;
  std::mutex mu;
  std::condition_variable cv;
  int bookings = 0, in_flight = 0, most_in_flight = 0;
  downstream_->on_call = [&](const CallRequest& req) {
    if (req.step.rfind("reserve_", 0) != 0) return;
    std::unique_lock<std::mutex> l(mu);
    ++bookings;
    most_in_flight = std::max(most_in_flight, ++in_flight);
    cv.notify_all();
    cv.wait_for(l, std::chrono::seconds(5), [&] { return bookings >= 3; });
    --in_flight;
  };
  struct Join {  // the calls' threads end before what they use goes
    testing::ScriptedDownstream& d;
    ~Join() { d.JoinThreads(); }
  } join{*downstream_};
  Create(TripBooking(), "t1",
         {{"flight", "F1"},
          {"traveller", "ada"},
          {"hotel", "H"},
          {"nights", 2},
          {"pickup", "P"},
          {"days", 2},
          {"amount", 10},
          {"currency", "EUR"},
          {"email", "a@b"}},
         *east_);
  driver_->Schedule("t1");
  // The pivot (issue_tickets) waits for a human after the charge.
  ASSERT_TRUE(Reaches("t1", "AWAITING_APPROVAL")) << Status("t1");
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(bookings, 3);
    EXPECT_EQ(most_in_flight, 3);
  }
  auto paths = Paths();
  ASSERT_EQ(paths.size(), 4u);
  EXPECT_EQ(paths[3], "/charges");
  std::sort(paths.begin(), paths.begin() + 3);
  EXPECT_EQ(paths[0], "/cars/rentals");
  EXPECT_EQ(paths[1], "/flights/holds");
  EXPECT_EQ(paths[2], "/hotels/bookings");
}

TEST_F(DriverTest, AFirstStepRidesInTheCreationCommitOnlyWhileAWorkerIsFree) {
  ASSERT_TRUE(defs_.Register(OrderFulfilment()).ok());
  SagaDefinitionPtr def = defs_.Get("order_fulfilment", 1);
  ASSERT_TRUE(def);
  auto first = [&](int* step) {
    Instance inst;
    Event created = Instance::CreatedEvent("n", *def, Order());
    created.seq = 1;
    ASSERT_TRUE(inst.Apply(created).ok());
    Tx tx(inst, clock_.NowMillis());
    StepRequest request;
    StepMark mark;
    ASSERT_TRUE(driver_->FirstStep(tx, *def, &mark, &request).ok());
    *step = mark.step();
    EXPECT_TRUE(!mark || runs_.StepUnderWay("n", *step));
  };
  int step = -2;
  first(&step);
  EXPECT_EQ(step, 0);
  // Every worker busy (4 drivers registered): the step starts from a driver.
  for (const char* id : {"a", "b", "c", "d"}) ASSERT_TRUE(runs_.Enter(id));
  first(&step);
  EXPECT_EQ(step, -1);
  for (const char* id : {"a", "b", "c", "d"}) runs_.Leave(id, false);
  // A graph always starts with a driver round (its roots start together).
  SagaDefinitionPtr trip = std::make_shared<SagaDefinition>(TripBooking());
  Instance inst;
  Event created = Instance::CreatedEvent("t", *trip, nlohmann::json::object());
  created.seq = 1;
  ASSERT_TRUE(inst.Apply(created).ok());
  Tx tx(inst, clock_.NowMillis());
  StepRequest request;
  StepMark mark;
  ASSERT_TRUE(driver_->FirstStep(tx, *trip, &mark, &request).ok());
  EXPECT_FALSE(mark);
}

// With one worker, an instance whose commit does not complete (an fsync
// that takes long, a PostgreSQL round trip) must not hold up another: no
// thread waits for a commit, neither a step's (`started`) nor the driver's
// own (`compensation_finished`, after a refused first step).
void DriverTest::NoWorkerWaitsFor(const char* type, Outcome first) {
  ScriptedDownstream downstream(*store_, {"inventory", "payments", "shipping"});
  downstream.answers = {first};
  HoldingStore holding(*store_);
  AsioExecutor one(1);
  InstanceRepository repo(holding, clock_, nullptr, &one);
  Ownership east(*store_, clock_, "east", 3000);
  ServiceGates gates(downstream, clock_);
  DefinitionRegistry defs;
  ASSERT_TRUE(defs.Register(OrderFulfilment()).ok());
  RunTable runs;
  RecoveryTracker recovery;
  EngineMetrics metrics;
  Driver driver(downstream, defs, repo, east, runs, recovery, metrics, gates, clock_,
                SystemRandom::Shared(), one, 1);
  auto create = [&](const std::string& id) {
    Instance inst;
    Event created = Instance::CreatedEvent(id, OrderFulfilment(), Order());
    created.seq = 1;
    ASSERT_TRUE(inst.Apply(created).ok());
    inst.set_version(1);
    Lease lease = east.FirstLease();
    ASSERT_TRUE(repo.Create(inst, {created}, {}, nullptr, &lease).ok());
    east.Adopt(id, lease);
  };
  auto status = [&](const std::string& id) {
    auto j = store_->GetInstance(id);
    return j.ok() ? j->value("status", "") : j.status().ToString();
  };
  create("held");
  holding.Hold("held", type);
  driver.Schedule("held");
  bool parked = WaitFor([&] { return holding.parked() > 0; });
  EXPECT_TRUE(parked) << status("held");
  create("free");
  driver.Schedule("free");
  EXPECT_TRUE(WaitFor([&] { return status("free") == "COMPLETED"; }, std::chrono::seconds(5)))
      << "a worker waits for the held commit; free is " << status("free");
  holding.Release();
  const char* end = first == Outcome::kCommitted ? "COMPLETED" : "COMPENSATED";
  EXPECT_TRUE(WaitFor([&] { return status("held") == end; })) << status("held");
  runs.StopAndWait();
  one.Shutdown();
  CloseStore();  // before `one` goes: the committer may still post to it
}

TEST_F(DriverTest, NoWorkerWaitsForAStepsCommit) {
  NoWorkerWaitsFor(StepEventName(StepEvent::kStart), Outcome::kCommitted);
}

TEST_F(DriverTest, NoWorkerWaitsForADriversCommit) {
  NoWorkerWaitsFor(SagaEventName(SagaEvent::kFinishCompensation), Outcome::kFailed);
}

}  // namespace
}  // namespace sagad
