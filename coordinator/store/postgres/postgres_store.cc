#include "coordinator/store/postgres/postgres_store.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "coordinator/store/postgres/postgres_connection.h"
#include "coordinator/store/postgres/postgres_rows.h"
#include "coordinator/store/store_fault.h"
#include "postgres_schema_sql.h"  // kPostgresSchema, from coordinator/store/postgres/postgres_schema.sql
#include "util/json_limits.h"

namespace sagad {
namespace {

constexpr int kPgSchemaVersion = 1;

int64_t WallMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool IsPostgresUri(const std::string& store) {
  return store.rfind("postgresql://", 0) == 0 || store.rfind("postgres://", 0) == 0;
}

std::string RedactUri(const std::string& uri) {
  size_t scheme = uri.find("://");
  if (scheme == std::string::npos) return uri;
  size_t at = uri.find('@', scheme + 3);
  size_t slash = uri.find('/', scheme + 3);
  std::string out = uri;
  if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
    size_t colon = uri.find(':', scheme + 3);
    if (colon != std::string::npos && colon < at)
      out = uri.substr(0, colon + 1) + "***" + uri.substr(at);
  }
  size_t pw = out.find("password=");
  if (pw != std::string::npos) {
    size_t end = out.find('&', pw);
    out = out.substr(0, pw + 9) + "***" + (end == std::string::npos ? "" : out.substr(end));
  }
  return out;
}

PostgresStore::PostgresStore(std::string uri, size_t pool_size, int64_t readback_ms)
    : uri_(std::move(uri)),
      fence_(new PrimaryFence()),
      pool_size_(pool_size < 2 ? 2 : pool_size),
      readback_ms_(readback_ms) {}

PostgresStore::~PostgresStore() {
  {
    MutexLock l(close_mu_);
    closing_ = true;  // a read-back or a backfill in progress gives up
    close_cv_.NotifyAll();
  }
  JoinBackfills();  // the group commit stops next
}

StatusOr<std::unique_ptr<PostgresStore>> PostgresStore::Open(const std::string& uri,
                                                             size_t pool_size,
                                                             int64_t readback_ms) {
  std::unique_ptr<PostgresStore> s(new PostgresStore(uri, pool_size, readback_ms));
  auto c = Connection::Open(uri, s->fence_.get());
  if (!c.ok()) return c.status();
  Connection& conn = **c;
  auto fail = [&](const Status& st) -> Status {
    (void)conn.Exec("ROLLBACK");
    return st;
  };
  // One migrator at a time: coordinators may start together.
  auto begin = conn.Exec(
      "BEGIN; SELECT pg_advisory_xact_lock(7318008301); "
      "CREATE TABLE IF NOT EXISTS sagad_meta (key text PRIMARY KEY, value text NOT NULL)");
  if (!begin.ok()) return fail(begin.status());
  auto meta = conn.Run("SELECT value FROM sagad_meta WHERE key = 'schema_version'", {});
  if (!meta.ok()) return fail(meta.status());
  int v = meta->rows() ? std::atoi(meta->get(0, 0).c_str()) : -1;
  if (v > kPgSchemaVersion)
    return fail(FailedPrecondition("database " + RedactUri(uri) + " has schema_version " +
                                   std::to_string(v) + ", newer than this sagad supports (" +
                                   std::to_string(kPgSchemaVersion) + "); refusing to open"));
  // v < 0: a new database. There is no older PostgreSQL schema yet; a
  // future version migrates here, step by step, before the schema below.
  auto schema = conn.Exec(kPostgresSchema);
  if (!schema.ok()) return fail(schema.status());
  auto stamp = conn.Run(
      "INSERT INTO sagad_meta VALUES ('schema_version', $1) "
      "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
      {std::to_string(kPgSchemaVersion)});
  if (!stamp.ok()) return fail(stamp.status());
  auto commit = conn.Exec("COMMIT");
  if (!commit.ok()) return commit.status();
  {
    MutexLock l(s->pool_mu_);
    s->open_ = 1;
  }
  s->Release(std::move(*c));
  return s;
}

StatusOr<std::unique_ptr<PostgresStore::Connection>> PostgresStore::Acquire() {
  {
    MutexLock l(pool_mu_);
    pool_cv_.Wait(pool_mu_,
                  [&]() REQUIRES(pool_mu_) { return !idle_.empty() || open_ < pool_size_; });
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      // A connection to a server older than the newest primary seen (an
      // old primary that came back) is never used again.
      if (!c->Broken() && !fence_->Behind(c->timeline())) return c;
      --open_;  // dropped below; a fresh one is opened in its place
    }
    ++open_;
  }
  auto c = Connect();
  if (!c.ok()) {
    MutexLock l(pool_mu_);
    --open_;
    pool_cv_.NotifyOne();
  }
  return c;
}

StatusOr<std::unique_ptr<PostgresStore::Connection>> PostgresStore::Connect() {
  {
    MutexLock l(connect_mu_);
    if (std::chrono::steady_clock::now() < connect_again_at_) return connect_error_;
  }
  std::string suspect;
  {
    MutexLock l(connect_mu_);
    suspect = suspect_;
  }
  auto c = Connection::Open(uri_, fence_.get(), suspect);
  MutexLock l(connect_mu_);
  if (c.ok()) {
    connect_backoff_ = std::chrono::milliseconds(0);
    if ((*c)->server() == suspect_) suspect_.clear();  // back: nothing to avoid
  } else {  // no server takes connections: wait longer each time, up to 1 s
    connect_backoff_ = std::clamp(2 * connect_backoff_, std::chrono::milliseconds(50),
                                  std::chrono::milliseconds(1000));
    connect_again_at_ = std::chrono::steady_clock::now() + connect_backoff_;
    connect_error_ = c.status();
  }
  return c;
}

StatusOr<PgRows> PostgresStore::Query(const char* statement, const std::vector<std::string>& params,
                                      bool* sent) {
  auto c = Acquire();
  if (!c.ok()) return c.status();
  if (sent) *sent = true;
  auto r = (*c)->Run(statement, params);
  Release(std::move(*c));
  if (!r.ok() && r.status().code() == StatusCode::kUnavailable) faults_.Note(r.status());
  return r;
}

void PostgresStore::Release(std::unique_ptr<Connection> c) {
  std::vector<std::unique_ptr<Connection>> dropped;  // closed after the lock
  if (c->Broken()) {
    MutexLock l(connect_mu_);
    suspect_ = c->server();
  }
  MutexLock l(pool_mu_);
  if (c->Broken()) {
    --open_;
    // The idle ones most likely lead to the same lost server: each would
    // cost a statement deadline to find out. They are opened again (to
    // whichever host is the primary now) as they are needed.
    open_ -= idle_.size();
    dropped.swap(idle_);
    dropped.push_back(std::move(c));
  } else {
    idle_.push_back(std::move(c));
  }
  pool_cv_.NotifyAll();
  l.Unlock();
}

namespace {

nlohmann::json EventsJson(const std::vector<Event>& events) {
  nlohmann::json a = nlohmann::json::array();
  for (const Event& e : events) a.push_back(e.ToJson());
  return a;
}

nlohmann::json LeaseJson(const Lease* lease) {
  if (!lease) return nullptr;
  return {{"owner", lease->owner},
          {"generation", lease->generation},
          {"ttl_ms", std::max<int64_t>(0, lease->expires_at - WallMillis())}};
}

}  // namespace

namespace {

// The columns of an instance row, from its snapshot; the snapshot itself
// travels as a JSON string (stored as is, never re-parsed by the server).
nlohmann::json InstanceColumns(const SnapshotRecord& snapshot) {
  return {{"version", snapshot.version},
          {"saga", snapshot.saga},
          {"status", snapshot.status},
          {"waiting", snapshot.waiting_for},
          {"finished", snapshot.status == "COMPLETED" || snapshot.status == "COMPENSATED"},
          {"updated_at", snapshot.updated_at},
          {"snapshot", snapshot.text}};
}

}  // namespace

nlohmann::json PostgresStore::CreateRequest(const nlohmann::json& snapshot,
                                            const std::vector<Event>& events,
                                            const Submission* submission,
                                            const std::vector<nlohmann::json>& outbox,
                                            const Lease* lease,
                                            const std::vector<OperationRecord>& operations) {
  nlohmann::json w = InstanceColumns(SnapshotRecord::FromJson(snapshot));
  w["kind"] = "create";
  w["id"] = snapshot.at("id").get<std::string>();
  w["events"] = EventsJson(events);
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& op : operations) ops.push_back(op.ToJson());
  w["operations"] = std::move(ops);
  w["outbox"] = outbox;
  w["lease"] = LeaseJson(lease);
  if (submission)
    w["submission"] = {{"key", submission->key},
                       {"request_hash", submission->request_hash},
                       {"instance_id", submission->instance_id},
                       {"created_at", submission->created_at}};
  return w;
}

Status PostgresStore::CreateInstance(const nlohmann::json& snapshot,
                                     const std::vector<Event>& events, const Submission* submission,
                                     const std::vector<nlohmann::json>& outbox, const Lease* lease,
                                     const std::vector<OperationRecord>& operations) {
  try {
    return Apply(CreateRequest(snapshot, events, submission, outbox, lease, operations));
  } catch (const std::exception& e) {
    return Internal(std::string("write refused: ") + e.what());
  }
}

void PostgresStore::CreateInstanceAsync(std::shared_ptr<const CreationWrite> c,
                                        std::function<void(Status)> done) {
  auto p = std::make_unique<Pending>();
  try {
    p->request = CreateRequest(c->snapshot, c->events, c->submission ? &*c->submission : nullptr,
                               c->outbox, c->lease ? &*c->lease : nullptr, c->operations);
  } catch (const std::exception& e) {
    done(Internal(std::string("write refused: ") + e.what()));
    return;
  }
  p->then = std::move(done);
  group_.CommitAsync(std::move(p));
}

StatusOr<nlohmann::json> PostgresStore::CommitRequest(
    const std::string& id, uint64_t expected_version, const SnapshotRecord& snapshot,
    const std::vector<Event>& events, const std::vector<OperationRecord>& operations,
    const std::vector<nlohmann::json>& outbox, const Lease* lease) {
  if (snapshot.version != expected_version + 1)
    return Internal("snapshot version must be expected_version + 1");
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& op : operations) ops.push_back(op.ToJson());
  nlohmann::json w = InstanceColumns(snapshot);
  w["kind"] = "commit";
  w["id"] = id;
  w["expected_version"] = expected_version;
  w["events"] = EventsJson(events);
  w["operations"] = std::move(ops);
  w["outbox"] = outbox;
  if (lease) w["lease"] = {{"owner", lease->owner}, {"generation", lease->generation}};
  return w;
}

Status PostgresStore::Commit(const std::string& id, uint64_t expected_version,
                             const nlohmann::json& snapshot, const std::vector<Event>& events,
                             const std::vector<OperationRecord>& operations,
                             const std::vector<nlohmann::json>& outbox, const Lease* lease) {
  auto w = CommitRequest(id, expected_version, SnapshotRecord::FromJson(snapshot), events,
                         operations, outbox, lease);
  if (!w.ok()) return w.status();
  return Apply(std::move(*w));
}

void PostgresStore::CommitAsync(std::shared_ptr<const TransitionWrite> t,
                                std::function<void(Status)> done) {
  auto w = CommitRequest(t->id, t->expected_version, t->snapshot, t->events, t->operations,
                         t->outbox, t->fence ? &*t->fence : nullptr);
  if (!w.ok()) {
    done(w.status());
    return;
  }
  auto p = std::make_unique<Pending>();
  p->request = std::move(*w);
  p->then = std::move(done);
  group_.CommitAsync(std::move(p));
}

namespace {
nlohmann::json ResponseRequest(const std::string& key, int status, const nlohmann::json& response) {
  return {{"kind", "response"},
          {"id", key},
          {"response_status", status},
          {"response", DumpJson(response)}};
}
}  // namespace

Status PostgresStore::SetSubmissionResponse(const std::string& key, int status,
                                            const nlohmann::json& response) {
  return Apply(ResponseRequest(key, status, response));
}

void PostgresStore::SetSubmissionResponseAsync(const std::string& key, int status,
                                               const nlohmann::json& response,
                                               std::function<void(Status)> done) {
  auto p = std::make_unique<Pending>();
  p->request = ResponseRequest(key, status, response);
  p->then = std::move(done);
  group_.CommitAsync(std::move(p));
}

StatusOr<std::map<std::string, Lease>> PostgresStore::AcquireLeases(
    const std::vector<std::string>& ids, const std::string& owner, const Clock&, int64_t ttl_ms,
    const std::string& successor_of) {
  std::map<std::string, Lease> taken;
  if (ids.empty()) return taken;
  auto r = Query("take_leases", {DumpJson(ids), owner, std::to_string(ttl_ms), successor_of});
  if (!r.ok()) return r.status();
  int64_t wall = WallMillis();
  for (int i = 0; i < r->rows(); ++i) {
    if (r->get(i, 1) != "t") continue;
    Lease l;
    l.owner = r->get(i, 2);
    l.expires_at = wall + (r->i64(i, 3) - r->i64(i, 5));
    l.generation = static_cast<uint64_t>(r->i64(i, 4));
    taken.emplace(r->get(i, 0), l);
  }
  return taken;
}

StatusOr<Lease> PostgresStore::AcquireLease(const std::string& id, const std::string& owner,
                                            const Clock&, int64_t ttl_ms,
                                            const std::string& successor_of) {
  auto r = Query("take_leases", {DumpJson(std::vector<std::string>{id}), owner,
                                 std::to_string(ttl_ms), successor_of});
  if (!r.ok()) return r.status();
  if (r->rows() != 1) return Internal("sagad_take_leases answered no row");
  int64_t expires = WallMillis() + (r->i64(0, 3) - r->i64(0, 5));
  if (r->get(0, 1) != "t")
    return LeaseLost("instance " + id + " is owned by '" + r->get(0, 2) + "' until " +
                     std::to_string(expires));
  Lease l;
  l.owner = r->get(0, 2);
  l.expires_at = expires;
  l.generation = static_cast<uint64_t>(r->i64(0, 4));
  return l;
}

StatusOr<std::vector<std::string>> PostgresStore::RenewLeases(const std::string& owner,
                                                              const std::vector<std::string>& ids,
                                                              const Clock&, int64_t ttl_ms) {
  std::vector<std::string> lost;
  if (ids.empty()) return lost;
  auto r = Query("renew_leases", {owner, DumpJson(ids), std::to_string(ttl_ms)});
  if (!r.ok()) return r.status();
  std::set<std::string> kept;
  for (int i = 0; i < r->rows(); ++i) kept.insert(r->get(i, 0));
  for (const auto& id : ids)
    if (!kept.count(id)) lost.push_back(id);
  return lost;
}

StatusOr<Lease> PostgresStore::GetLease(const std::string& id) {
  auto r = Query("get_lease", {id});
  if (!r.ok()) return r.status();
  if (r->rows() == 0) return NotFound("not found: " + id);
  Lease l;
  l.owner = r->get(0, 0);
  l.expires_at = WallMillis() + (r->i64(0, 1) - r->i64(0, 3));
  l.generation = static_cast<uint64_t>(r->i64(0, 2));
  return l;
}

StatusOr<std::vector<OutboxRecord>> PostgresStore::PeekOutbox(size_t max) {
  MutexLock l(outbox_mu_);
  if (outbox_conn_ && (outbox_conn_->Broken() || fence_->Behind(outbox_conn_->timeline())))
    outbox_conn_.reset();
  if (!outbox_conn_) {
    auto c = Connect();
    if (!c.ok()) return c.status();
    outbox_conn_ = std::move(*c);
    outbox_locked_ = false;
  }
  if (!outbox_locked_) {
    auto r = outbox_conn_->Exec("SELECT pg_try_advisory_lock(7318008302)");
    if (!r.ok()) return r.status();
    outbox_locked_ = r->get(0, 0) == "t";
    if (!outbox_locked_) return std::vector<OutboxRecord>{};  // another process publishes
  }
  auto r = outbox_conn_->Run("peek_outbox", {std::to_string(max)});
  if (!r.ok()) return r.status();
  std::vector<OutboxRecord> out;
  for (int i = 0; i < r->rows(); ++i) {
    nlohmann::json j = nlohmann::json::parse(r->get(i, 1), nullptr, false);
    out.push_back({static_cast<uint64_t>(r->i64(i, 0)), j.is_discarded() ? nlohmann::json() : j});
  }
  return out;
}

Status PostgresStore::AckOutbox(uint64_t seq) {
  MutexLock l(outbox_mu_);
  if (!outbox_conn_ || !outbox_locked_) return FailedPrecondition("not the outbox publisher");
  auto r = outbox_conn_->Run("ack_outbox", {std::to_string(seq)});
  return r.ok() ? Status::Ok() : r.status();
}

StatusOr<size_t> PostgresStore::OutboxSize() {
  auto r = Query("outbox_size", {});
  if (!r.ok()) return r.status();
  return static_cast<size_t>(r->i64(0, 0));
}

}  // namespace sagad
