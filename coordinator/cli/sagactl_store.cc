// sagactl's commands that read a store directly (inspect, verify, export),
// and the offline check of a receipt file.
#include <sys/stat.h>

#include <fstream>
#include <iostream>

#include "coordinator/cli/sagactl.h"
#include "coordinator/engine/instances/receipt.h"
#include "coordinator/store/lmdb/lmdb_store.h"
#include "coordinator/store/postgres/postgres_store.h"
#include "util/json_limits.h"

namespace sagactl {

// Replays every instance's event log and compares it with the stored
// snapshot; prints each mismatch. Exit 1 if there is any.
// Opens the store of an existing data dir (or the PostgreSQL store of
// --store URL); never creates a data dir (a mistyped path must not look like
// an empty store).
std::unique_ptr<sagad::Store> OpenExisting(const Args& a) {
  if (a.Has("store")) {
    if (!sagad::IsPostgresUri(a.Get("store"))) Die("--store must be a postgresql:// URI", 2);
    auto pg = sagad::PostgresStore::Open(a.Get("store"), 2);
    if (!pg.ok()) Die(pg.status().message());
    return std::move(*pg);
  }
  std::string dir = a.Get("data-dir");
  if (dir.empty()) Die("needs --data-dir DIR or --store URL", 2);
  struct stat st;
  if (stat((dir + "/data.mdb").c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    Die("no sagad data dir at " + dir + " (no data.mdb there)");
  if (st.st_size == 0)
    Die(dir +
        "/data.mdb is empty (0 bytes): not a store sagad wrote (a failed copy?); restore "
        "the data dir from a backup");
  auto store = sagad::LmdbStore::OpenReadOnly(dir);
  if (!store.ok()) Die(store.status().message());
  return std::move(*store);
}

int Verify(const Args& a) {
  auto store = OpenExisting(a);
  int checked = 0, mismatches = 0;
  std::string cursor;
  do {
    auto page = store->ListInstances({}, 500, cursor);
    if (!page.ok()) Die(page.status().message());
    for (const json& snap : page->instances) {
      std::string id = snap.value("id", "");
      ++checked;
      auto events = store->GetEvents(id);
      if (!events.ok()) Die(events.status().message());
      auto inst = sagad::Instance::Replay(id, *events);
      if (!inst.ok()) {
        ++mismatches;
        std::cout << id << ": the event log does not replay: " << inst.status().message() << "\n";
        continue;
      }
      inst->set_version(snap.value("version", uint64_t(0)));
      json replayed = inst->ToJson();
      if (replayed == snap) continue;
      ++mismatches;
      std::cout << id << ": snapshot differs from the replayed log:";
      for (const auto& [k, v] : replayed.items())
        if (!snap.contains(k) || snap[k] != v) std::cout << " " << k;
      for (const auto& [k, v] : snap.items())
        if (!replayed.contains(k)) std::cout << " " << k;
      std::cout << "\n";
    }
    cursor = page->next_cursor;
  } while (!cursor.empty());
  std::vector<std::string> problems;
  if (sagad::Status s = store->VerifyIndexes(&problems); !s.ok()) Die(s.message());
  for (const std::string& p : problems) std::cout << p << "\n";
  mismatches += static_cast<int>(problems.size());
  std::cout << checked << " instances checked, " << mismatches << " mismatches\n";
  return mismatches == 0 ? 0 : 1;
}

// Writes instances with their events as JSON lines ({"instance", "events"}),
// for archives before retention deletes them: every instance, or with
// --finished-before MS only those that finished (COMPLETED, COMPENSATED)
// before that time (ms since the epoch).
int Export(const Args& a) {
  int64_t before = -1;
  if (a.Has("finished-before")) {
    const std::string t = a.Get("finished-before");
    if (t.empty() || t.size() > 15 || t.find_first_not_of("0123456789") != std::string::npos)
      Die("--finished-before must be a time in ms since the epoch", 2);
    before = std::stoll(t);
  }
  auto store = OpenExisting(a);
  std::string cursor;
  size_t written = 0;
  do {
    auto page = store->ListInstances({}, 500, cursor);
    if (!page.ok()) Die(page.status().message());
    for (const json& snap : page->instances) {
      std::string status = snap.value("status", "");
      if (before >= 0 && !((status == "COMPLETED" || status == "COMPENSATED") &&
                           snap.value("updated_at", int64_t(0)) < before))
        continue;
      auto events = store->GetEvents(snap.value("id", ""));
      if (!events.ok()) Die(events.status().message());
      json evs = json::array();
      for (const auto& e : *events) evs.push_back(e.ToJson());
      std::cout << sagad::DumpJson({{"instance", snap}, {"events", evs}}) << "\n";
      ++written;
    }
    cursor = page->next_cursor;
  } while (!cursor.empty());
  std::cerr << written << " instances exported\n";
  return 0;
}

size_t Count(const std::string& text, const std::string& flag) {
  if (text.empty() || text.size() > 9 ||
      text.find_first_not_of("0123456789") != std::string::npos || std::stoul(text) == 0)
    Die(flag + " must be a positive whole number", 2);
  return std::stoul(text);
}

int Inspect(const Args& a, bool as_json) {
  auto store = OpenExisting(a);
  if (a.positional.size() > 1) {
    auto inst = store->GetInstance(a.positional[1]);
    if (!inst.ok()) Die(inst.status().message());
    if (as_json) {
      std::cout << sagad::DumpJson(*inst, 2) << "\n";
    } else {
      PrintInstance(*inst);
      auto ev = store->GetEvents(a.positional[1]);
      if (ev.ok()) {
        json arr = json::array();
        for (const auto& e : *ev) arr.push_back(e.ToJson());
        std::cout << "\n";
        PrintEvents(arr);
      }
    }
    return 0;
  }
  auto page = store->ListInstances({a.Get("status"), a.Get("saga"), a.Get("waiting")},
                                   Count(a.Get("limit", "1000"), "--limit"), a.Get("cursor"));
  if (!page.ok()) Die(page.status().message());
  if (as_json)
    std::cout << sagad::DumpJson(json(page->instances), 2) << "\n";
  else
    PrintList(page->instances, page->next_cursor.empty() ? json() : json(page->next_cursor));
  return 0;
}

}  // namespace sagactl

namespace sagactl {

int VerifyReceiptFile(const Args& a) {
  if (a.positional.size() < 2) Die("missing the receipt's file: sagactl verify-receipt FILE", 2);
  const std::string& file = a.positional[1];
  std::ifstream in(file);
  if (!in) Die("cannot read " + file);
  json r = json::parse(in, nullptr, false);
  if (r.is_discarded()) Die(file + " is not JSON");
  size_t entries = 0;
  sagad::Status s = sagad::VerifyReceipt(r, &entries);
  if (!s.ok()) {
    std::cout << file << ": NOT intact: " << s.message() << "\n";
    return 1;
  }
  std::cout << file << ": intact: receipt of " << r.value("kind", "") << " "
            << r.value("instance_id", "") << " (" << r.value("name", "") << " version "
            << r.value("version", 0) << "), " << entries << " entries, head " << r.value("head", "")
            << "\n";
  return 0;
}

}  // namespace sagactl
