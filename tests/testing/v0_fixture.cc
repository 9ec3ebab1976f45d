#include "tests/testing/v0_fixture.h"

#include <lmdb.h>
#include <sys/stat.h>

#include <stdexcept>

#include "examples/examples.h"
#include "sagas/instance.h"

namespace sagad::testing {
namespace {

void Check(int rc, const char* what) {
  if (rc != 0) throw std::runtime_error(std::string(what) + ": " + mdb_strerror(rc));
}

void Put(MDB_txn* txn, MDB_dbi dbi, const std::string& key, const std::string& value) {
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{value.size(), const_cast<char*>(value.data())};
  Check(mdb_put(txn, dbi, &k, &v, 0), "mdb_put");
}

std::string EventKey(const std::string& id, int64_t seq) {
  std::string k = id;
  k.push_back('\0');
  for (int i = 7; i >= 0; --i) k.push_back(static_cast<char>((uint64_t(seq) >> (i * 8)) & 0xff));
  return k;
}

// Builds an instance from its events, as schema 0 stored it.
void WriteInstance(MDB_txn* txn, MDB_dbi instances, MDB_dbi events, const std::string& id,
                   const SagaDefinition& def, const nlohmann::json& input,
                   const std::vector<std::pair<std::string, std::string>>& steps_events) {
  std::vector<Event> log;
  Event created = Instance::CreatedEvent(id, def, input);
  created.seq = 1;
  created.at_ms = 1700000000000;
  log.push_back(created);
  for (const auto& [step, type] : steps_events) {
    Event e;
    e.seq = static_cast<int64_t>(log.size()) + 1;
    e.at_ms = 1700000000000 + e.seq;
    e.step = step;
    e.type = type;
    if (type == "started") e.data = {{"key", id + ":" + step}, {"attempt", 1}};
    if (type == "committed")
      e.data = {{"result", {{"ref", "OLD-" + step}}}, {"external_ref", "OLD-" + step}};
    log.push_back(e);
  }
  auto inst = Instance::Replay(id, log);
  if (!inst.ok()) throw std::runtime_error(inst.status().ToString());
  inst->set_version(log.size());
  nlohmann::json snap = inst->ToJson();
  for (const char* f : {"schema_version", "current_step", "waiting_for", "next_retry_at"})
    snap.erase(f);
  Put(txn, instances, id, snap.dump());
  for (const Event& e : log) Put(txn, events, EventKey(id, e.seq), e.ToJson().dump());
}

}  // namespace

V0Fixture WriteV0DataDir(const std::string& dir) {
  mkdir(dir.c_str(), 0755);
  MDB_env* env;
  Check(mdb_env_create(&env), "mdb_env_create");
  mdb_env_set_maxdbs(env, 16);
  mdb_env_set_mapsize(env, size_t(64) << 20);
  Check(mdb_env_open(env, dir.c_str(), 0, 0644), "mdb_env_open");
  MDB_txn* txn;
  Check(mdb_txn_begin(env, nullptr, 0, &txn), "mdb_txn_begin");
  MDB_dbi instances, events, operations, submissions, meta;
  Check(mdb_dbi_open(txn, "instances", MDB_CREATE, &instances), "open instances");
  Check(mdb_dbi_open(txn, "events", MDB_CREATE, &events), "open events");
  Check(mdb_dbi_open(txn, "operations", MDB_CREATE, &operations), "open operations");
  Check(mdb_dbi_open(txn, "submissions", MDB_CREATE, &submissions), "open submissions");
  Check(mdb_dbi_open(txn, "meta", MDB_CREATE, &meta), "open meta");
  V0Fixture f{"000000000001-00000000000000aa", "000000000002-00000000000000bb"};
  WriteInstance(txn, instances, events, f.order_id, OrderFulfilment(),
                {{"sku", "OLD"},
                 {"qty", 1},
                 {"amount", 10},
                 {"currency", "EUR"},
                 {"customer", "c"},
                 {"address", "x"}},
                {{"reserve_inventory", "started"}, {"reserve_inventory", "committed"}});
  WriteInstance(
      txn, instances, events, f.incident_id, IncidentResponse(),
      {{"title", "old"}, {"severity", "low"}, {"host", "h"}, {"user", "u"}, {"email", "e@x"}},
      {{"create_ticket", "started"},
       {"create_ticket", "committed"},
       {"isolate_host", "started"},
       {"isolate_host", "committed"},
       {"disable_account", "started"},
       {"disable_account", "committed"},
       {"notify_user", "approval_requested"},
       {"", "saga_awaiting_approval"}});
  Put(txn, meta, "schema_version", "0");
  Check(mdb_txn_commit(txn), "mdb_txn_commit");
  mdb_env_close(env);
  return f;
}

}  // namespace sagad::testing
