// The promises (docs/reliability.md) that need a real sagad, on each store (run again
// with SAGAD_TEST_STORE=postgres): a U+0000 in what the API receives is
// refused with 400 and never disturbs other writes, one in a downstream
// reply is recorded escaped (21.5); definitions are checked before anything
// runs, the examples run only when asked for, an input_schema is checked at
// submission, a compensation's result is kept (21.4).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

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
  Reply keyed =
      sagad.Post("/v1/sagas/order_fulfilment/instances", {{"input", {{std::string("k\0", 2), 1}}}});
  EXPECT_EQ(keyed.status, 400) << keyed.raw;
  EXPECT_EQ(sagad.Terminate(), 0);
}

TEST_F(PromiseTest, NulInADownstreamReplyIsRecordedEscaped) {
  std::atomic<bool> refuse{false};
  RogueDownstream rogue([&](const RawRequest& r) {
    if (r.path.rfind("/operations/", 0) == 0) return RawAnswer(404, "{}");
    if (refuse) return RawAnswer(422, std::string("no\0pe", 5), "text/plain");
    return RawAnswer(201, R"({"ref":"R1","note":"a\u0000b"})");
  });
  Coordinator sagad(downstream_, dir_.path() + "/data",
                    {{"payments", {{"base_url", rogue.url()}}}});
  ASSERT_GT(sagad.Start(), 0);
  Reply r = sagad.Submit("order_fulfilment", OrderInput(), 10);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["status"], "COMPLETED") << r.raw;
  EXPECT_EQ(r.body["steps"][1]["result"].value("note", ""), "a\\x00b") << r.raw;
  EXPECT_EQ(rogue.Count("/charges"), 1);  // recorded at once: no loop, no re-send
  // A raw NUL in a refusal's text is kept escaped in last_error too.
  refuse = true;
  Reply refused = sagad.Submit("order_fulfilment", OrderInput(), 10);
  EXPECT_EQ(refused.body.value("status", ""), "COMPENSATED") << refused.raw;
  EXPECT_NE(refused.body["steps"][1].value("last_error", "").find("no\\x00pe"), std::string::npos)
      << refused.raw;
  EXPECT_EQ(sagad.Terminate(), 0);
}

std::string Slurp(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

TEST_F(PromiseTest, ASagaNamingAServiceNobodyConfiguredStopsSagadBeforeAnything) {
  std::string err = dir_.path() + "/stderr";
  Subprocess sagad({SAGAD_BIN, "--examples", "--data-dir", dir_.path() + "/data", "--listen",
                    "127.0.0.1:0", "--service", "inventory=" + downstream_.url()},
                   {}, err);
  EXPECT_EQ(sagad.Wait(), 2);
  std::string said = Slurp(err);
  EXPECT_NE(said.find("saga 'incident_response' step 'create_ticket' calls service 'ticketing', "
                      "which is not configured"),
            std::string::npos)
      << said;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/data"));  // nothing was opened
}

TEST_F(PromiseTest, TheExamplesRunOnlyWhenAskedFor) {
  Coordinator sagad(downstream_, dir_.path() + "/data");
  sagad.Configure({{"examples", false}});
  ASSERT_GT(sagad.Start(), 0);
  EXPECT_EQ(sagad.Submit("incident_response", IncidentInput()).status, 404);
  EXPECT_EQ(sagad.Get("/v1/sagas").body["sagas"].size(), 0u) << sagad.Get("/v1/sagas").raw;
  EXPECT_EQ(sagad.Terminate(), 0);
}

TEST_F(PromiseTest, SagadCheckValidatesEverythingAndOpensNothing) {
  std::string defs = dir_.path() + "/defs";
  std::filesystem::create_directories(defs);
  nlohmann::json transfer = {
      {"name", "transfer"},
      {"input_schema", {{"type", "object"}, {"properties", {{"amount", {{"type", "number"}}}}}}},
      {"steps",
       {{{"name", "debit"},
         {"forward",
          {{"service", "payments"},
           {"path", "/charges"},
           {"body", {{"amount", "{{input.amount}}"}}}}},
         {"compensation", {{"service", "payments"}, {"path", "/charges/{{debit.ref}}/refund"}}},
         {"approval_if", {{"field", "amout"}, {"op", ">"}, {"value", 1000}}}}}}};
  std::ofstream(defs + "/transfer.json") << transfer.dump();
  std::string config = dir_.path() + "/config.json";
  std::ofstream(config) << nlohmann::json{{"data_dir", dir_.path() + "/data"},
                                          {"services",
                                           {{"payments", {{"base_url", downstream_.url()}}}}}}
                               .dump();
  std::string err = dir_.path() + "/stderr";
  Subprocess bad({SAGAD_BIN, "check", "--config", config, "--definitions", defs}, {}, err);
  EXPECT_EQ(bad.Wait(), 2);
  EXPECT_NE(Slurp(err).find("approval rule field 'amout'"), std::string::npos) << Slurp(err);
  transfer["steps"][0]["approval_if"]["field"] = "amount";
  std::ofstream(defs + "/transfer.json") << transfer.dump();
  Subprocess good({SAGAD_BIN, "check", "--config", config, "--definitions", defs});
  std::string out = good.ReadOutput();
  EXPECT_EQ(good.Wait(), 0) << out;
  EXPECT_NE(out.find("transfer v1"), std::string::npos) << out;
  EXPECT_NE(out.find("debit: POST payments /charges"), std::string::npos) << out;
  std::remove(err.c_str());
  Subprocess examples({SAGAD_BIN, "check", "--config", config, "--examples"}, {}, err);
  EXPECT_EQ(examples.Wait(), 2);  // the examples name services this config lacks
  EXPECT_NE(Slurp(err).find("not configured"), std::string::npos) << Slurp(err);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/data"));
}

TEST_F(PromiseTest, AnInputSchemaIsCheckedAtSubmissionWith422AndEveryPath) {
  std::string defs = dir_.path() + "/defs";
  std::filesystem::create_directories(defs);
  nlohmann::json transfer = {
      {"name", "transfer"},
      {"input_schema",
       {{"type", "object"},
        {"required", {"amount"}},
        {"properties", {{"amount", {{"type", "number"}, {"exclusiveMinimum", 0}}}}}}},
      {"steps",
       {{{"name", "debit"},
         {"forward",
          {{"service", "payments"},
           {"path", "/charges"},
           {"body", {{"amount", "{{input.amount}}"}, {"currency", "EUR"}, {"customer", "c"}}}}},
         {"compensation", {{"service", "payments"}, {"path", "/charges/{{debit.ref}}/refund"}}}}}}};
  std::ofstream(defs + "/transfer.json") << transfer.dump();
  Coordinator sagad(downstream_, dir_.path() + "/data");
  sagad.AddArgs({"--definitions", defs});
  ASSERT_GT(sagad.Start(), 0);
  for (const nlohmann::json& amount : {nlohmann::json("lots"), nlohmann::json(-5)}) {
    Reply r = sagad.Submit("transfer", {{"amount", amount}});
    EXPECT_EQ(r.status, 422) << r.raw;
    ASSERT_TRUE(r.body["errors"].is_array()) << r.raw;
    EXPECT_EQ(r.body["errors"][0]["path"], "/amount") << r.raw;
  }
  EXPECT_EQ(downstream_.RouteCount("charge_payment"), 0);
  Reply ok = sagad.Submit("transfer", {{"amount", 5}}, 10);
  EXPECT_EQ(ok.body.value("status", ""), "COMPLETED") << ok.raw;
  EXPECT_EQ(sagad.Terminate(), 0);
}

TEST_F(PromiseTest, ACompensationKeepsItsResultAndReference) {
  Coordinator sagad(downstream_, dir_.path() + "/data");
  ASSERT_GT(sagad.Start(), 0);
  downstream_.Fault({{"path", "/shipments"}, {"action", "reject"}});
  Reply r = sagad.Submit("order_fulfilment", OrderInput(), 10);
  ASSERT_EQ(r.body.value("status", ""), "COMPENSATED") << r.raw;
  const nlohmann::json& refund = r.body["steps"][1]["compensation"];
  EXPECT_EQ(refund.value("status", ""), "COMPENSATED") << r.raw;
  EXPECT_FALSE(refund.value("external_ref", "").empty()) << r.raw;
  EXPECT_TRUE(refund["result"].is_object()) << r.raw;
  EXPECT_EQ(sagad.Terminate(), 0);
}

}  // namespace
}  // namespace sagad::testing
