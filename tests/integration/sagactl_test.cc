// sagactl against a real sagad: every command, tables and --json, and clear
// errors (unknown instance, server down, missing token, bad usage).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tests/testing/cluster.h"

namespace sagad::testing {
namespace {

using nlohmann::json;

struct CtlRun {
  int code;
  std::string out, err;
};

class SagactlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sagad_ = std::make_unique<Coordinator>(downstream_, dir_.path() + "/data");
    ASSERT_GT(sagad_->Start(), 0);
  }
  CtlRun Ctl(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    std::vector<std::string> argv = {SAGACTL_BIN};
    if (!env.count("SAGAD_URL"))
      env["SAGAD_URL"] = "http://127.0.0.1:" + std::to_string(sagad_->port());
    argv.insert(argv.end(), args.begin(), args.end());
    std::string err_path = dir_.path() + "/err" + std::to_string(++runs_);
    Subprocess p(argv, env, err_path);
    CtlRun r;
    r.out = p.ReadOutput();
    r.code = p.Wait();
    std::ifstream e(err_path);
    std::stringstream ss;
    ss << e.rdbuf();
    r.err = ss.str();
    return r;
  }
  TempDir dir_;
  Downstream downstream_;
  std::unique_ptr<Coordinator> sagad_;
  int runs_ = 0;
};

TEST_F(SagactlTest, DeploysADefinitionFile) {
  json def = {
      {"name", "restock"},
      {"version", 3},
      {"steps",
       {{{"name", "reserve"},
         {"forward", {{"service", "inventory"}, {"path", "/reservations"}}},
         {"compensation",
          {{"service", "inventory"}, {"path", "/reservations/{{reserve.ref}}/release"}}}}}}};
  const std::string file = dir_.path() + "/restock.json";
  std::ofstream(file) << def.dump();
  CtlRun first = Ctl({"deploy", file});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("saga restock version 3 deployed"), std::string::npos) << first.out;
  EXPECT_EQ(Ctl({"deploy", file}).code, 0);  // the same again
  def["deadline_ms"] = 1000;
  std::ofstream(file) << def.dump();
  CtlRun changed = Ctl({"deploy", file});
  EXPECT_EQ(changed.code, 1);
  EXPECT_NE(changed.err.find("409"), std::string::npos) << changed.err;
  EXPECT_EQ(sagad_->Get("/v1/sagas/restock/versions/3").status, 200);
  EXPECT_EQ(Ctl({"deploy", dir_.path() + "/missing.json"}).code, 2);
}

// graph: the steps of a saga as Graphviz dot or a Mermaid flowchart, with
// the join of a graph saga and the flags an operator must know.
TEST_F(SagactlTest, DrawsASagaAsDotOrMermaid) {
  CtlRun dot = Ctl({"graph", "trip_booking"});
  ASSERT_EQ(dot.code, 0) << dot.err;
  EXPECT_EQ(dot.out.rfind("digraph \"trip_booking v1\" {", 0), 0u) << dot.out;
  for (const char* from : {"reserve_flight", "reserve_hotel", "reserve_car"})
    EXPECT_NE(dot.out.find(std::string("\"") + from + "\" -> \"charge_card\";"), std::string::npos)
        << dot.out;
  EXPECT_NE(dot.out.find("\"charge_card\" -> \"issue_tickets\";"), std::string::npos);
  CtlRun mermaid = Ctl({"graph", "incident_response@1", "--format", "mermaid"});
  ASSERT_EQ(mermaid.code, 0) << mermaid.err;
  EXPECT_EQ(mermaid.out.rfind("flowchart TD\n", 0), 0u) << mermaid.out;
  EXPECT_NE(mermaid.out.find("s0 --> s1"), std::string::npos) << mermaid.out;
  EXPECT_NE(mermaid.out.find("notify_user<br/>(approval, irreversible)"), std::string::npos)
      << mermaid.out;
  CtlRun unknown = Ctl({"graph", "nope"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.err.find("404"), std::string::npos) << unknown.err;
  EXPECT_EQ(Ctl({"graph", "trip_booking", "--format", "svg"}).code, 2);
}

TEST_F(SagactlTest, PausesListsAndResumesAService) {
  CtlRun paused = Ctl({"pause", "payments", "--reason", "incident"});
  ASSERT_EQ(paused.code, 0) << paused.err;
  EXPECT_NE(paused.out.find("payments"), std::string::npos) << paused.out;
  EXPECT_NE(paused.out.find("paused"), std::string::npos) << paused.out;
  EXPECT_NE(paused.out.find("(incident)"), std::string::npos) << paused.out;  // why
  CtlRun list = Ctl({"--json", "services"});
  ASSERT_EQ(list.code, 0) << list.err;
  bool seen = false;
  const json services = json::parse(list.out)["services"];  // kept: the loop walks it
  for (const auto& svc : services)
    if (svc["name"] == "payments") seen = svc["paused"] == true;
  EXPECT_TRUE(seen) << list.out;
  CtlRun resumed = Ctl({"resume", "payments"});
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("open"), std::string::npos) << resumed.out;
  CtlRun unknown = Ctl({"pause", "nope"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.err.find("404"), std::string::npos) << unknown.err;
  EXPECT_EQ(Ctl({"pause"}).code, 2);  // no service named
}

TEST_F(SagactlTest, DrivesAnIncidentFromSubmitToCompletion) {
  CtlRun submit = Ctl({"--json", "submit", "incident_response", "--input", IncidentInput().dump(),
                       "--wait", "10", "--key", "ctl-1"});
  ASSERT_EQ(submit.code, 0) << submit.err;
  json inst = json::parse(submit.out);
  std::string id = inst["id"];
  EXPECT_EQ(inst["status"], "AWAITING_APPROVAL");

  CtlRun list = Ctl({"list"});
  EXPECT_EQ(list.code, 0);
  EXPECT_NE(list.out.find("ID"), std::string::npos);
  EXPECT_NE(list.out.find(id), std::string::npos);
  EXPECT_NE(list.out.find("approval"), std::string::npos);

  CtlRun approvals = Ctl({"approvals"});
  EXPECT_NE(approvals.out.find("notify_user"), std::string::npos);

  CtlRun show = Ctl({"show", id});
  EXPECT_NE(show.out.find("AWAITING_APPROVAL"), std::string::npos);
  EXPECT_NE(show.out.find("create_ticket"), std::string::npos);

  CtlRun approve = Ctl({"approve", id, "notify_user", "--comment", "from the cli"});
  ASSERT_EQ(approve.code, 0) << approve.err;
  // The answer says what was done and shows the instance as it left it:
  // never the approval still awaited.
  EXPECT_EQ(approve.out.rfind("approved notify_user of " + id + "\n", 0), 0u) << approve.out;
  EXPECT_EQ(approve.out.find("AWAITING_APPROVAL"), std::string::npos) << approve.out;
  EXPECT_EQ(sagad_->WaitStatus(id, "COMPLETED")["status"], "COMPLETED");

  CtlRun events = Ctl({"events", id});
  EXPECT_NE(events.out.find("saga_completed"), std::string::npos);
  EXPECT_NE(events.out.find("comment=from the cli"), std::string::npos);
  CtlRun bundle = Ctl({"bundle", id});
  EXPECT_EQ(json::parse(bundle.out)["instance"]["id"], id);

  // Offline, with sagad stopped.
  EXPECT_EQ(sagad_->Terminate(), 0);
  CtlRun offline = Ctl({"inspect", "--data-dir", dir_.path() + "/data"});
  EXPECT_EQ(offline.code, 0) << offline.err;
  EXPECT_NE(offline.out.find(id), std::string::npos);
  CtlRun one = Ctl({"inspect", "--data-dir", dir_.path() + "/data", id});
  EXPECT_NE(one.out.find("COMPLETED"), std::string::npos);
  EXPECT_NE(one.out.find("approved"), std::string::npos);
}

TEST_F(SagactlTest, SaysClearlyWhatWentWrong) {
  CtlRun missing = Ctl({"show", "no-such-id"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("404"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;
  CtlRun down = Ctl({"list"}, {{"SAGAD_URL", "http://127.0.0.1:1"}});
  EXPECT_EQ(down.code, 1);
  EXPECT_NE(down.err.find("cannot reach sagad"), std::string::npos) << down.err;
  CtlRun usage = Ctl({"frobnicate"});
  EXPECT_EQ(usage.code, 2);
  EXPECT_NE(usage.err.find("unknown command"), std::string::npos);
  CtlRun bad_json = Ctl({"submit", "order_fulfilment", "--input", "{oops"});
  EXPECT_EQ(bad_json.code, 2);
  EXPECT_NE(bad_json.err.find("--input must be a JSON object"), std::string::npos);
  CtlRun refused = Ctl({"cancel", "no-such-id"});
  EXPECT_EQ(refused.code, 1);
}

TEST(SagactlAuthTest, MissingTokenIs401AndTheTokenFlagWorks) {
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data", json::object(),
                    {{{"name", "ops"}, {"token", "tok"}, {"role", "operator"}}});
  ASSERT_GT(sagad.Start(), 0);
  std::string url = "http://127.0.0.1:" + std::to_string(sagad.port());
  std::string err_path = dir.path() + "/err";
  {
    Subprocess p({SAGACTL_BIN, "--url", url, "list"}, {}, err_path);
    EXPECT_EQ(p.Wait(), 1);
  }
  std::ifstream e(err_path);
  std::stringstream ss;
  ss << e.rdbuf();
  EXPECT_NE(ss.str().find("401"), std::string::npos) << ss.str();
  Subprocess ok({SAGACTL_BIN, "--url", url, "list"}, {{"SAGAD_TOKEN", "tok"}});
  EXPECT_EQ(ok.Wait(), 0);
}

TEST_F(SagactlTest, ExportsFinishedInstancesWithTheirEventsAsJsonLines) {
  Reply done = sagad_->Submit("order_fulfilment", OrderInput(), 10);
  ASSERT_EQ(done.body["status"], "COMPLETED");
  Reply waiting = sagad_->Submit("incident_response", IncidentInput(), 10);
  ASSERT_EQ(waiting.body["status"], "AWAITING_APPROVAL");
  CtlRun all = Ctl({"export", "--data-dir", dir_.path() + "/data"});
  ASSERT_EQ(all.code, 0) << all.err;
  CtlRun finished = Ctl({"export", "--data-dir", dir_.path() + "/data", "--finished-before",
                         std::to_string(done.body["updated_at"].get<int64_t>() + 1)});
  ASSERT_EQ(finished.code, 0) << finished.err;
  std::istringstream lines(finished.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    json j = json::parse(line);
    EXPECT_EQ(j["instance"]["id"], done.body["id"]);
    EXPECT_EQ(j["events"].back()["type"], "saga_completed");
    ++n;
  }
  EXPECT_EQ(n, 1);
  EXPECT_EQ(std::count(all.out.begin(), all.out.end(), '\n'), 2);
}

TEST_F(SagactlTest, RefusesWhatWouldActOnTheWrongThing) {
  // A missing data dir is an error, and stays missing.
  std::string missing = dir_.path() + "/no-such-dir";
  for (const char* cmd : {"inspect", "verify"}) {
    CtlRun r = Ctl({cmd, "--data-dir", missing});
    EXPECT_EQ(r.code, 1) << cmd << ": " << r.out;
    EXPECT_NE(r.err.find("no sagad data dir"), std::string::npos) << r.err;
    struct stat st;
    EXPECT_NE(stat(missing.c_str(), &st), 0) << cmd << " created " << missing;
  }
  // A zero-length data.mdb (a failed copy) is named as such.
  std::string empty = dir_.path() + "/empty-dir";
  ASSERT_EQ(mkdir(empty.c_str(), 0755), 0);
  std::ofstream(empty + "/data.mdb").close();
  CtlRun zero = Ctl({"inspect", "--data-dir", empty});
  EXPECT_EQ(zero.code, 1) << zero.out;
  EXPECT_NE(zero.err.find("data.mdb is empty (0 bytes)"), std::string::npos) << zero.err;
  CtlRun ftp = Ctl({"--url", "ftp://x", "show", "abc"});
  EXPECT_EQ(ftp.code, 2) << ftp.err;
  EXPECT_NE(ftp.err.find("--url"), std::string::npos) << ftp.err;
  for (const char* id : {"..", ".", "../../metrics"}) {
    CtlRun r = Ctl({"show", id});
    EXPECT_TRUE(r.code == 1 || r.code == 2) << id;
    EXPECT_EQ(r.out.find("sagad_up"), std::string::npos) << id << " reached /metrics";
  }
  CtlRun bad = Ctl({"show", "\xff"});
  EXPECT_EQ(bad.code, 1) << bad.err;
  EXPECT_NE(bad.err.find("400"), std::string::npos) << bad.err;
  EXPECT_EQ(sagad_->Get("/healthz").status, 200);
  CtlRun limit = Ctl({"inspect", "--data-dir", dir_.path() + "/data", "--limit", "lots"});
  EXPECT_EQ(limit.code, 2) << limit.err;
}

}  // namespace
}  // namespace sagad::testing
