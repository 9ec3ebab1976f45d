// PostgresStore: reads, listing, retention and the writability check.
#include "coordinator/store/postgres/postgres_connection.h"
#include "coordinator/store/postgres/postgres_rows.h"
#include "coordinator/store/postgres/postgres_store.h"
#include "sagas/search_attributes.h"
#include "util/json_limits.h"

namespace sagad {

StatusOr<nlohmann::json> PostgresStore::GetInstance(const std::string& id) {
  auto r = Query("get_instance", {id});
  if (!r.ok()) return r.status();
  if (r->rows() == 0) return InstanceNotFound(id);
  return ParseStored(r->get(0, 0), "instance " + id);
}

StatusOr<std::vector<Event>> PostgresStore::GetEvents(const std::string& id) {
  auto r = Query("get_events", {id});
  if (!r.ok()) return r.status();
  std::vector<Event> out;
  for (int i = 0; i < r->rows(); ++i) {
    auto j = ParseStored(r->get(i, 0), "event of " + id);
    if (!j.ok()) return j.status();
    auto e = Event::FromJson(*j);
    if (!e.ok()) return e.status();
    out.push_back(std::move(*e));
  }
  return out;
}

StatusOr<OperationRecord> PostgresStore::GetOperation(const std::string& key) {
  auto r = Query("get_operation", {key});
  if (!r.ok()) return r.status();
  if (r->rows() == 0) return NotFound("not found: " + key);
  auto j = ParseStored(r->get(0, 0), "operation " + key);
  if (!j.ok()) return j.status();
  return OperationRecord::FromJson(*j);
}

StatusOr<Submission> PostgresStore::GetSubmission(const std::string& key) {
  auto r = Query("get_submission", {key});
  if (!r.ok()) return r.status();
  if (r->rows() == 0) return NotFound("not found: " + key);
  Submission s;
  s.key = r->get(0, 0);
  s.request_hash = r->get(0, 1);
  s.instance_id = r->get(0, 2);
  s.response_status = static_cast<int>(r->i64(0, 3));
  auto resp = ParseStored(r->get(0, 4), "submission " + key);
  if (!resp.ok()) return resp.status();
  s.response = *resp;
  s.created_at = r->i64(0, 5);
  return s;
}

std::string PostgresStore::ListStatement(const InstanceFilter& filter, size_t limit,
                                         const std::string& cursor,
                                         std::vector<std::string>* out_params, bool by_attribute) {
  // Only the conditions in use, so each filter gets its index.
  std::string sql = "SELECT snapshot, id FROM sagad_instances WHERE true";
  std::vector<std::string>& params = *out_params;
  // The id the page is ordered and bounded by: a declared attribute's rows
  // in their primary key's order (name, value, instance_id), read backward.
  std::string id = "id";
  if (by_attribute) {
    params = {(filter.in_metadata ? kMetadataAttributePrefix : "") + filter.input_field,
              filter.input_value};
    sql =
        "SELECT snapshot, id FROM sagad_attributes JOIN sagad_instances ON id = instance_id "
        "WHERE name = $1 AND value = $2";
    id = "instance_id";
  }
  auto add = [&](const char* cond, const std::string& value) {
    params.push_back(value);
    sql += std::string(" AND ") + cond + " $" + std::to_string(params.size());
  };
  if (!filter.status.empty()) add("status =", filter.status);
  if (!filter.saga.empty()) add("saga =", filter.saga);
  if (!filter.waiting.empty()) add("waiting =", filter.waiting);
  if (!filter.owner.empty()) add("(snapshot::jsonb) ->> 'owner' =", filter.owner);
  if (!filter.idempotency_key.empty()) {
    add("id IN (SELECT instance_id FROM sagad_submissions WHERE key =", filter.idempotency_key);
    sql += ")";
  }
  if (!filter.input_field.empty() && !by_attribute) {
    params.push_back(filter.input_field);
    // The object searched: the input, or a run's metadata (a literal).
    const std::string root = filter.in_metadata ? "'metadata'" : "'input'";
    const std::string value =
        "snapshot::jsonb -> " + root + " -> $" + std::to_string(params.size());
    // What the search compares: sagad_search_text (the schema), as the
    // declared attributes' rows hold it.
    add(("sagad_search_text(" + value + ") =").c_str(), filter.input_value);
    // The same, as containment the GIN index sagad_instances_input answers:
    // the field holds the string, or (when the value is JSON) that value.
    const std::string field = "$" + std::to_string(params.size() - 1);
    const std::string input = "((snapshot::jsonb) -> " + root + ") @> jsonb_build_object(" + field;
    sql += " AND (" + input + "::text, $" + std::to_string(params.size()) + "::text)";
    nlohmann::json scalar = nlohmann::json::parse(filter.input_value, nullptr, false);
    if (!scalar.is_discarded() && !scalar.is_string() && !scalar.is_structured()) {
      params.push_back(scalar.dump());
      sql += " OR " + input + "::text, $" + std::to_string(params.size()) + "::jsonb)";
    }
    sql += ")";
  }
  if (!cursor.empty()) add((id + " <").c_str(), cursor);
  // Creation time: ranges of ids (ids sort by creation), on the primary key.
  if (filter.created_before > 0) add((id + " <").c_str(), IdFloor(filter.created_before));
  if (filter.created_after > 0) add((id + " >=").c_str(), IdFloor(filter.created_after + 1));
  sql += " ORDER BY " + id + " DESC LIMIT " + std::to_string(limit + 1);
  return sql;
}

StatusOr<InstancePage> PostgresStore::ListInstances(const InstanceFilter& filter, size_t limit,
                                                    const std::string& cursor) {
  auto by_attribute = AttributeComplete(filter);
  if (!by_attribute.ok()) return by_attribute.status();
  std::vector<std::string> params;
  const std::string sql = ListStatement(filter, limit, cursor, &params, *by_attribute);
  auto r = Query(sql.c_str(), params);
  if (!r.ok()) return r.status();
  InstancePage page;
  page.indexed = true;  // the input and a run's metadata have a GIN index each
  for (int i = 0; i < r->rows() && page.instances.size() < limit; ++i) {
    auto j = ParseStored(r->get(i, 0), "instance " + r->get(i, 1));
    if (!j.ok()) continue;
    page.instances.push_back(std::move(*j));
  }
  if (size_t(r->rows()) > limit) page.next_cursor = r->get(int(limit) - 1, 1);
  return page;
}

StatusOr<std::vector<ActiveInstance>> PostgresStore::ListActive() {
  auto r = Query("list_active", {});
  if (!r.ok()) return r.status();
  std::vector<ActiveInstance> out;
  for (int i = 0; i < r->rows(); ++i)
    out.push_back({r->get(i, 0), r->get(i, 1), r->get(i, 2), static_cast<uint64_t>(r->i64(i, 3))});
  return out;
}

uint64_t PostgresStore::SyncedCommits() const { return synced_commits_; }

StatusOr<std::vector<std::string>> PostgresStore::DeleteFinished(int64_t finished_before_ms,
                                                                 size_t max) {
  auto r = Query("delete_finished", {std::to_string(finished_before_ms), std::to_string(max)});
  if (!r.ok()) return r.status();
  std::vector<std::string> ids;
  for (int i = 0; i < r->rows(); ++i) ids.push_back(r->get(i, 0));
  if (!ids.empty()) ++synced_commits_;
  return ids;
}

std::string PostgresStore::StalePrimary() const { return fence_->Stale(); }

Status PostgresStore::CheckWritable() {
  auto r = Query("writable", {});
  if (!r.ok()) return r.status();
  if (r->get(0, 0) == "t") return Unavailable("the database is read-only (a standby)");
  // Reads or writes failing while the database answers (a schema changed
  // under sagad): not ready until they have stopped failing for 5 s.
  return faults_.Recent(5000);
}

StatusOr<std::function<void()>> PostgresStore::LockShared(const std::string& name) {
  std::unique_ptr<Connection> c;
  {
    MutexLock l(lock_conns_mu_);
    if (!lock_conns_.empty()) {
      c = std::move(lock_conns_.back());
      lock_conns_.pop_back();
    }
  }
  if (!c || c->Broken()) {
    auto fresh = Connect();
    if (!fresh.ok()) return fresh.status();
    c = std::move(*fresh);
  }
  // Waits on the server, within the statement's deadline (5 s, then the
  // connection is dropped: Unavailable).
  auto r = c->Run("SELECT pg_advisory_lock(hashtextextended($1, 0))", {name});
  if (!r.ok()) return r.status();
  auto held = std::make_shared<std::unique_ptr<Connection>>(std::move(c));
  return std::function<void()>([this, held, name] {
    std::unique_ptr<Connection> conn = std::move(*held);
    if (!conn) return;
    // A failed unlock drops the connection: the server ends the lock with it.
    if (!conn->Run("SELECT pg_advisory_unlock(hashtextextended($1, 0))", {name}).ok()) return;
    MutexLock l(lock_conns_mu_);
    if (lock_conns_.size() < 4) lock_conns_.push_back(std::move(conn));
  });
}

StatusOr<std::vector<std::string>> PostgresStore::PausedServices() {
  auto r = Query("paused_services", {});
  if (!r.ok()) return r.status();
  std::vector<std::string> out;
  for (int i = 0; i < r->rows(); ++i) out.push_back(r->get(i, 0));
  return out;
}

Status PostgresStore::SetServicePaused(const std::string& service, bool paused,
                                       const nlohmann::json& note) {
  const bool kept = paused && note.is_object();
  auto r = Query("set_paused", {service, paused ? "true" : "false", kept ? DumpJson(note) : ""});
  return r.ok() ? Status::Ok() : r.status();
}

StatusOr<nlohmann::json> PostgresStore::PauseNotes() {
  auto r = Query("pause_notes", {});
  if (!r.ok()) return r.status();
  nlohmann::json out = nlohmann::json::object();
  for (int i = 0; i < r->rows(); ++i) {
    nlohmann::json note = nlohmann::json::parse(r->get(i, 1), nullptr, false);
    if (note.is_object()) out[r->get(i, 0)] = std::move(note);
  }
  return out;
}

StatusOr<bool> PostgresStore::PutDefinition(const std::string& name, int version,
                                            const nlohmann::json& body) {
  auto put = Query("put_definition", {name, std::to_string(version), DumpJson(body)});
  if (!put.ok()) return put.status();
  if (put->rows() == 1 && put->get(0, 0) == "t") return true;
  std::string held_text = put->rows() == 1 ? put->get(0, 1) : "";
  if (put->rows() == 0) {  // another coordinator's insert committed after the statement began
    auto r = Query("SELECT body FROM sagad_definitions WHERE name = $1 AND version = $2::int",
                   {name, std::to_string(version)});
    if (!r.ok()) return r.status();
    if (r->rows() != 1) return Internal("a deployed definition vanished: " + name);
    held_text = r->get(0, 0);
  }
  auto held = ParseStored(held_text, "definition " + name);
  if (held.ok() && *held == body) return false;
  return AlreadyExists("saga '" + name + "' version " + std::to_string(version) +
                       " is deployed with another definition");
}

StatusOr<std::vector<StoredDefinition>> PostgresStore::ListDefinitions() {
  auto r = Query("list_definitions", {});
  if (!r.ok()) return r.status();
  std::vector<StoredDefinition> out;
  for (int i = 0; i < r->rows(); ++i) {
    auto body = ParseStored(r->get(i, 2), "definition " + r->get(i, 0));
    if (!body.ok()) return body.status();
    out.push_back({r->get(i, 0), static_cast<int>(r->i64(i, 1)), std::move(*body)});
  }
  return out;
}

}  // namespace sagad
