// PostgresStore's group commit (leader/follower, as LmdbStore's): the writer
// at the front of the queue sends every queued write in one sagad_apply call
// (one round trip, one WAL flush); a batch the server refuses for what one
// write holds is retried write by write, so one bad write fails alone.
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

// Group commit, leader/follower as in LmdbStore::GroupCommit: the writer at
// the front sends everything queued as one sagad_apply call.
Status PostgresStore::Apply(nlohmann::json request) {
  Pending p;
  p.request = std::move(request);
  MutexLock l(group_mu_);
  group_queue_.push_back(&p);
  p.cv->Wait(group_mu_, [&]() REQUIRES(group_mu_) { return p.done || group_queue_.front() == &p; });
  if (p.done) return p.result;
  std::vector<Pending*> batch(group_queue_.begin(), group_queue_.end());
  l.Unlock();
  // One sagad_apply call for the whole batch. If the server refuses it for
  // what one write holds (not for connection trouble), each write is tried
  // alone: one bad write fails alone, the others are applied.
  std::vector<Status> results(batch.size());
  std::vector<std::string> answers(batch.size());
  Status batch_status = RunApply(batch, 0, batch.size(), &answers);
  if (!batch_status.ok() && batch.size() > 1 && batch_status.code() != StatusCode::kUnavailable) {
    for (size_t i = 0; i < batch.size(); ++i) results[i] = RunApply(batch, i, i + 1, &answers);
  } else {
    for (auto& r : results) r = batch_status;
  }
  std::vector<std::shared_ptr<CondVar>> wake;
  wake.reserve(batch.size());
  l.Lock();
  for (size_t i = 0; i < batch.size(); ++i) {
    Pending* w = batch[i];
    group_queue_.pop_front();
    if (!results[i].ok()) {
      w->result = results[i];
    } else {
      const std::string& a = answers[i];
      const std::string id = w->request.value("id", "");
      if (a == "ok")
        w->result = Status::Ok();
      else if (a == "exists")
        w->result = AlreadyExists("instance " + id + " exists");
      else if (a == "key_exists")
        w->result = AlreadyExists("key exists: " + w->request["submission"].value("key", ""));
      else if (a == "missing")
        w->result = NotFound("not found: " + id);
      else if (a.rfind("version:", 0) == 0)
        w->result = Aborted("instance " + id + " changed: version " + a.substr(8) + ", expected " +
                            std::to_string(w->request.value("expected_version", 0)));
      else if (a.rfind("lease:", 0) == 0) {
        size_t colon = a.rfind(':');
        w->result = LeaseLost("lease lost: instance " + id + " is owned by '" +
                              a.substr(6, colon - 6) + "' generation " + a.substr(colon + 1));
      } else {
        w->result = Internal("sagad_apply: unexpected answer " + a);
      }
    }
    w->done = true;
    if (w != &p) wake.push_back(w->cv);
  }
  if (!group_queue_.empty()) wake.push_back(group_queue_.front()->cv);
  l.Unlock();
  for (const auto& cv : wake) cv->NotifyOne();
  return p.result;
}

}  // namespace sagad
