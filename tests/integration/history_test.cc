// History and versions: definition versions side by side, an instance keeps
// the version it started with, a missing version goes to review; the stored
// snapshot always equals the replayed event log (sagactl verify); data
// written in an older layout is migrated and runs to completion.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "tests/testing/cluster.h"
#include "tests/testing/v0_fixture.h"

namespace sagad::testing {
namespace {

using nlohmann::json;

json Versioned(int version, bool with_ship) {
  json reserve = {{"name", "reserve"},
                  {"forward",
                   {{"service", "inventory"},
                    {"path", "/reservations"},
                    {"body", {{"sku", "{{input.sku}}"}, {"qty", 1}}}}},
                  {"compensation",
                   {{"service", "inventory"}, {"path", "/reservations/{{reserve.ref}}/release"}}}};
  json charge = {
      {"name", "charge"},
      {"forward",
       {{"service", "payments"},
        {"path", "/charges"},
        {"body", {{"amount", 5}, {"currency", "EUR"}, {"customer", "c"}}}}},
      {"compensation", {{"service", "payments"}, {"path", "/charges/{{charge.ref}}/refund"}}},
      {"requires_approval", true}};
  json steps = {reserve, charge};
  if (with_ship)
    steps.push_back(
        {{"name", "ship"},
         {"forward",
          {{"service", "shipping"}, {"path", "/shipments"}, {"body", {{"address", "x"}}}}},
         {"compensation", {{"service", "shipping"}, {"path", "/shipments/{{ship.ref}}/cancel"}}}});
  return {{"name", "versioned"}, {"version", version}, {"steps", steps}};
}

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    defs_ = dir_.path() + "/defs";
    std::filesystem::create_directories(defs_);
    std::ofstream(defs_ + "/v1.json") << Versioned(1, false).dump();
    std::ofstream(defs_ + "/v2.json") << Versioned(2, true).dump();
    sagad_ = std::make_unique<Coordinator>(downstream_, dir_.path() + "/data");
    sagad_->AddArgs({"--definitions", defs_});
    ASSERT_GT(sagad_->Start(), 0);
  }
  Reply Submit(const std::string& query) {
    return Http(sagad_->port(), "POST", "/v1/sagas/versioned/instances?wait=10" + query,
                json{{"input", {{"sku", "S"}}}}.dump());
  }
  TempDir dir_;
  std::string defs_;
  Downstream downstream_;
  std::unique_ptr<Coordinator> sagad_;
};

TEST_F(HistoryTest, NewestVersionByDefaultAndAnInstanceKeepsItsVersion) {
  Reply v2 = Submit("");
  EXPECT_EQ(v2.body["saga_version"], 2);
  EXPECT_EQ(v2.body["steps"].size(), 3u);
  Reply v1 = Submit("&version=1");
  EXPECT_EQ(v1.body["saga_version"], 1);
  EXPECT_EQ(v1.body["steps"].size(), 2u);
  EXPECT_EQ(Submit("&version=9").status, 404);
  EXPECT_EQ(Submit("&version=zero").status, 400);
  std::string id = v1.body["id"];
  ASSERT_EQ(sagad_->Post("/v1/instances/" + id + "/steps/charge/approve").status, 200);
  json done = sagad_->WaitStatus(id, "COMPLETED");
  EXPECT_EQ(done["status"], "COMPLETED");
  EXPECT_EQ(downstream_.RouteCount("create_shipment"), 0);  // v1 has no shipping step
}

TEST_F(HistoryTest, AnInstanceWhoseVersionIsGoneGoesToReview) {
  Reply v1 = Submit("&version=1");
  ASSERT_EQ(v1.body["status"], "AWAITING_APPROVAL");
  std::string id = v1.body["id"];
  ASSERT_EQ(sagad_->Terminate(), 0);
  std::filesystem::remove(defs_ + "/v1.json");
  ASSERT_GT(sagad_->Start(), 0);
  json review = sagad_->WaitStatus(id, "NEEDS_REVIEW");
  ASSERT_EQ(review["status"], "NEEDS_REVIEW") << review.dump();
  EXPECT_NE(review["review_reason"].get<std::string>().find("version 1 is not registered"),
            std::string::npos);
  EXPECT_EQ(downstream_.RouteCount("charge_payment"), 0);  // not run under v2
}

}  // namespace
}  // namespace sagad::testing

namespace sagad::testing {
namespace {

TEST(MigrationTest, ADataDirFromSchemaZeroIsMigratedAndItsInstancesComplete) {
  TempDir dir;
  V0Fixture f = WriteV0DataDir(dir.path() + "/data");
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  ASSERT_GT(sagad.Start(), 0);
  json order = sagad.WaitStatus(f.order_id, "COMPLETED");
  EXPECT_EQ(order["status"], "COMPLETED") << order.dump();
  EXPECT_EQ(order["steps"][0]["external_ref"], "OLD-reserve_inventory");  // not re-run
  EXPECT_EQ(downstream.RouteCount("reserve_inventory"), 0);
  EXPECT_EQ(downstream.RouteCount("charge_payment"), 1);
  ASSERT_EQ(sagad.Post("/v1/instances/" + f.incident_id + "/steps/notify_user/approve").status,
            200);
  EXPECT_EQ(sagad.WaitStatus(f.incident_id, "COMPLETED")["status"], "COMPLETED");
  EXPECT_EQ(downstream.RouteCount("send_message"), 1);
  EXPECT_EQ(sagad.Get("/v1/instances?status=COMPLETED").body["instances"].size(), 2u);
}

}  // namespace
}  // namespace sagad::testing

namespace sagad::testing {
namespace {

int RunVerify(const std::string& data_dir, std::string* out) {
  Subprocess p({SAGACTL_BIN, "verify", "--data-dir", data_dir});
  *out = p.ReadOutput();
  return p.Wait();
}

TEST(VerifyTest, SnapshotsEqualTheirReplayedLogsAndATamperedOneIsReported) {
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  ASSERT_GT(sagad.Start(), 0);
  downstream.Fault({{"path", "/charges"}, {"action", "commit_500"}});
  downstream.Fault({{"path", "/shipments"}, {"action", "reject"}});
  sagad.Submit("order_fulfilment", OrderInput(), 10);  // unknown, reconciled, compensated
  sagad.Submit("order_fulfilment", OrderInput(), 10);  // completed
  std::string waiting = sagad.Submit("incident_response", IncidentInput(), 10).body["id"];
  ASSERT_EQ(sagad.Terminate(), 0);
  std::string out;
  EXPECT_EQ(RunVerify(dir.path() + "/data", &out), 0) << out;
  EXPECT_NE(out.find("3 instances checked, 0 mismatches"), std::string::npos) << out;

  // Tamper with one snapshot behind sagad's back.
  auto store = LmdbStore::Open(dir.path() + "/data");
  ASSERT_TRUE(store.ok());
  auto snap = (*store)->GetInstance(waiting);
  nlohmann::json bad = *snap;
  bad["status"] = "COMPLETED";
  bad["version"] = bad["version"].get<int>() + 1;
  ASSERT_TRUE((*store)->Commit(waiting, (*snap)["version"], bad, {}, {}, {}, nullptr).ok());
  store->reset();
  EXPECT_EQ(RunVerify(dir.path() + "/data", &out), 1);
  EXPECT_NE(out.find(waiting + ": snapshot differs from the replayed log: status"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace sagad::testing
