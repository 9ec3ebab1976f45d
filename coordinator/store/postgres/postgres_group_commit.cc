// PostgresStore's group commit (GroupCommit: leader/follower, and a committer
// thread for CommitAsync): the leader sends every queued write in one sagad_apply call
// (one round trip, one WAL flush); a batch the server refuses for what one
// write holds is retried write by write, so one bad write fails alone.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "coordinator/store/postgres/postgres_rows.h"
#include "coordinator/store/postgres/postgres_store.h"
#include "util/json_limits.h"
#include "util/log.h"

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
    char id[40];
    std::snprintf(id, sizeof id, "%016llx%016llx", static_cast<unsigned long long>(RandomU64()),
                  static_cast<unsigned long long>(RandomU64()));
    const std::string batch_id = id;
    bool sent = false;
    auto r = Query("apply", {batch_id, DumpJson(writes)}, &sent);
    std::string got;
    if (r.ok()) {
      got = r->get(0, 0);
    } else if (r.status().code() != StatusCode::kUnavailable || !sent) {
      return r.status();  // refused by the server, or never sent: nothing applied
    } else {              // no answer: it may have been committed
      auto back = ReadBack(batch_id, r.status());
      if (!back.ok()) return back.status();
      got = *back;
    }
    ++synced_commits_;
    if (++batches_ % 1024 == 0) (void)Query("prune_batches", {"3600000"});  // an hour
    std::vector<std::string> parsed = ParseTextArray(got);
    if (parsed.size() != to - from) return Internal("sagad_apply answered " + got);
    for (size_t i = from; i < to; ++i) (*answers)[i] = parsed[i - from];
    return Status::Ok();
  } catch (const std::exception& e) {
    return Internal(std::string("write refused: ") + e.what());
  }
}

StatusOr<std::string> PostgresStore::ReadBack(const std::string& batch_id, const Status& why) {
  EngineLog({{"msg",
              "no answer to a commit (the connection broke, or the server gave up on it); reading "
              "its outcome back"},
             {"batch", batch_id},
             {"error", why.message()}});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(readback_ms_);
  std::chrono::milliseconds pause(50);
  Status last = why;
  do {
    auto r = Query("batch_outcome", {batch_id});
    if (r.ok() && r->null(0, 0)) {
      EngineLog({{"msg", "read back: the batch was not committed"}, {"batch", batch_id}});
      return Unavailable("this write was not committed (" + why.message() + "); retry");
    }
    if (r.ok()) {
      EngineLog({{"msg", "read back: the batch was committed"}, {"batch", batch_id}});
      return r->get(0, 0);
    }
    if (r.status().code() != StatusCode::kUnavailable) return r.status();
    last = r.status();
    pause = std::min(2 * pause, std::chrono::milliseconds(1000));
  } while (std::chrono::steady_clock::now() + pause < deadline && Pause(pause));
  EngineLog(LogLevel::kError, {{"msg", "read back failed: the outcome of the batch is unknown"},
                               {"batch", batch_id},
                               {"error", last.message()}});
  return Unavailable(
      "the database connection broke while this write was being committed and whether it was "
      "cannot be learnt now (" +
      last.message() + "); the instance is read again before anything is decided");
}

bool PostgresStore::Pause(std::chrono::milliseconds d) {
  MutexLock l(close_mu_);
  close_cv_.WaitFor(close_mu_, d, [this]() REQUIRES(close_mu_) { return closing_; });
  return !closing_;
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
