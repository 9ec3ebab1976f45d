// PostgresStore's group commit (GroupCommit: leader/follower, and a committer
// thread for CommitAsync): the leader sends every queued write in one sagad_apply call
// (one round trip, one WAL flush); a batch the server refuses for what one
// write holds is retried write by write, so one bad write fails alone.
#include <algorithm>

#include "coordinator/store/postgres/postgres_rows.h"
#include "coordinator/store/postgres/postgres_store.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

// A text[] in PostgreSQL's text form: {ok,"version:3","lease:a b:2"}.
std::vector<std::string> ParseTextArray(const std::string& text) {
  std::vector<std::string> out;
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return out;
  std::string cur;
  bool quoted = false, any = false;
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '\\' && i + 2 < text.size())
        cur += text[++i];
      else if (c == '"')
        quoted = false;
      else
        cur += c;
    } else if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
      any = true;
    }
  }
  if (any || !out.empty()) out.push_back(cur);
  return out;
}

}  // namespace

Status PostgresStore::RunApply(const std::vector<Pending*>& batch, size_t from, size_t to,
                               std::vector<std::string>* answers) {
  try {
    nlohmann::json writes = nlohmann::json::array();
    for (size_t i = from; i < to; ++i) writes.push_back(batch[i]->request);
    auto r = Query("apply", {DumpJson(writes)});
    if (!r.ok()) return r.status();
    ++synced_commits_;
    std::vector<std::string> got = ParseTextArray(r->get(0, 0));
    if (got.size() != to - from) return Internal("sagad_apply answered " + r->get(0, 0));
    for (size_t i = from; i < to; ++i) (*answers)[i] = got[i - from];
    return Status::Ok();
  } catch (const std::exception& e) {
    return Internal(std::string("write refused: ") + e.what());
  }
}

Status PostgresStore::Apply(nlohmann::json request) {
  Pending p;
  p.request = std::move(request);
  return group_.Commit(p);
}

// One sagad_apply call for the whole batch. If the server refuses it for
// what one write holds (not for connection trouble), each write is tried
// alone: one bad write fails alone, the others are applied.
void PostgresStore::ApplyBatch(const std::vector<GroupCommit::Write*>& writes) {
  // In instance order (bytes, as COLLATE "C"; an instance's own writes keep
  // theirs), so the leases the batch reads FOR SHARE are locked in the order
  // every other statement locks them (no deadlock with another
  // coordinator's takeover). Each id is read once, not at every comparison.
  std::vector<std::pair<std::string, Pending*>> keyed;
  keyed.reserve(writes.size());
  for (GroupCommit::Write* w : writes) {
    auto* p = static_cast<Pending*>(w);
    keyed.emplace_back(p->request.value("id", ""), p);
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Pending*> batch;
  batch.reserve(keyed.size());
  for (auto& [id, p] : keyed) batch.push_back(p);
  std::vector<Status> results(batch.size());
  std::vector<std::string> answers(batch.size());
  Status batch_status = RunApply(batch, 0, batch.size(), &answers);
  if (!batch_status.ok() && batch.size() > 1 && batch_status.code() != StatusCode::kUnavailable) {
    for (size_t i = 0; i < batch.size(); ++i) results[i] = RunApply(batch, i, i + 1, &answers);
  } else {
    for (auto& r : results) r = batch_status;
  }
  for (size_t i = 0; i < batch.size(); ++i)
    batch[i]->result = results[i].ok() ? AnswerOf(*batch[i], answers[i]) : results[i];
}

Status PostgresStore::AnswerOf(const Pending& w, const std::string& a) {
  const std::string id = w.request.value("id", "");
  if (a == "ok") return Status::Ok();
  if (a == "exists") return AlreadyExists("instance " + id + " exists");
  if (a == "key_exists")
    return AlreadyExists("key exists: " + (w.request.contains("submission")
                                               ? w.request.at("submission").value("key", "")
                                               : ""));
  if (a == "missing") return NotFound("not found: " + id);
  if (a.rfind("version:", 0) == 0)
    return Aborted("instance " + id + " changed: version " + a.substr(8) + ", expected " +
                   std::to_string(w.request.value("expected_version", 0)));
  if (a.rfind("lease:", 0) == 0) {
    size_t colon = a.rfind(':');
    return LeaseLost("lease lost: instance " + id + " is owned by '" + a.substr(6, colon - 6) +
                     "' generation " + a.substr(colon + 1));
  }
  return Internal("sagad_apply: unexpected answer " + a);
}

}  // namespace sagad
