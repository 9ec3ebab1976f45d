#include "coordinator/store/postgres/postgres_connection.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "coordinator/store/store_fault.h"
#include "util/log.h"

namespace sagad {
namespace {

// Statements prepared on every connection.
struct Statement {
  const char* name;
  const char* sql;
};
constexpr Statement kStatements[] = {
    {"apply", "SELECT sagad_apply_batch($1, $2::json)"},
    {"batch_outcome", "SELECT sagad_batch_outcome($1)"},
    {"prune_batches", "DELETE FROM sagad_batches WHERE at < sagad_now_ms() - $1::bigint"},
    {"take_leases",
     "SELECT lease_id, taken, lease_owner, lease_expires, lease_generation, sagad_now_ms() "
     "FROM sagad_take_leases($1::json, $2, $3::bigint, $4)"},
    // Locked in id order first, as sagad_take_leases takes them: a renewal
    // and another coordinator's takeover never wait for each other in a cycle.
    {"renew_leases",
     "WITH mine AS (SELECT instance_id FROM sagad_leases WHERE owner = $1 AND instance_id IN "
     "(SELECT json_array_elements_text($2::json)) ORDER BY instance_id COLLATE \"C\" FOR UPDATE) "
     "UPDATE sagad_leases l SET expires_at = sagad_now_ms() + $3::bigint FROM mine "
     "WHERE l.instance_id = mine.instance_id RETURNING l.instance_id"},
    {"get_lease",
     "SELECT owner, expires_at, generation, sagad_now_ms() FROM sagad_leases "
     "WHERE instance_id = $1 AND owner <> ''"},
    {"get_instance", "SELECT snapshot FROM sagad_instances WHERE id = $1"},
    {"get_events", "SELECT data FROM sagad_events WHERE instance_id = $1 ORDER BY seq"},
    {"get_operation", "SELECT data FROM sagad_operations WHERE key = $1"},
    {"get_submission",
     "SELECT key, request_hash, instance_id, response_status, response, created_at "
     "FROM sagad_submissions WHERE key = $1"},
    {"list_active",
     "SELECT id, saga, status, version FROM sagad_instances WHERE NOT finished ORDER BY id"},
    {"peek_outbox", "SELECT seq, message FROM sagad_outbox ORDER BY seq LIMIT $1::bigint"},
    {"ack_outbox", "DELETE FROM sagad_outbox WHERE seq = $1::bigint"},
    {"outbox_size", "SELECT count(*) FROM sagad_outbox"},
    {"writable", "SELECT pg_is_in_recovery()"},
    {"delete_finished", "SELECT sagad_delete_finished($1::bigint, $2::int)"},
    {"paused_services", "SELECT name FROM sagad_services WHERE paused ORDER BY name"},
    {"put_definition",
     "WITH ins AS (INSERT INTO sagad_definitions VALUES ($1, $2::int, $3) "
     "ON CONFLICT (name, version) DO NOTHING RETURNING body) "
     "SELECT true, body FROM ins UNION ALL "
     "SELECT false, body FROM sagad_definitions WHERE name = $1 AND version = $2::int "
     "AND NOT EXISTS (SELECT 1 FROM ins)"},
    {"list_definitions",
     "SELECT name, version, body FROM sagad_definitions ORDER BY name, version"},
    {"set_paused",
     "INSERT INTO sagad_services (name, paused, note) VALUES ($1, $2::boolean, NULLIF($3, '')) "
     "ON CONFLICT (name) DO UPDATE SET paused = EXCLUDED.paused, note = CASE "
     "WHEN sagad_services.paused AND EXCLUDED.paused THEN sagad_services.note "
     "ELSE EXCLUDED.note END"},
    {"pause_notes",
     "SELECT name, note FROM sagad_services WHERE paused AND note IS NOT NULL ORDER BY name"},
};

bool IsConnectionTrouble(const char* sqlstate) {
  if (!sqlstate) return true;  // no server answer at all
  std::string s = sqlstate;
  return s.rfind("08", 0) == 0 || s == "57P01" || s == "57P02" || s == "57P03" ||
         s == "25006" /* read-only transaction: a standby */ || s == "53300" /* too many */;
}

}  // namespace

PostgresStore::Connection::~Connection() { Drop(); }

void PostgresStore::Connection::Drop() {
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
}

Status PostgresStore::PrimaryFence::Admit(const std::string& system, int64_t timeline,
                                          const std::string& where) {
  MutexLock l(mu_);
  if (system.empty() || timeline <= 0) return Status::Ok();
  if (!system_.empty() && (system != system_ || timeline < timeline_)) {
    stale_ = where + " is " +
             (system != system_ ? "another database system (" + system + ", not " + system_ + ")"
                                : "on timeline " + std::to_string(timeline) + ", behind timeline " +
                                      std::to_string(timeline_) + " this sagad wrote to") +
             ": an old primary, never written to again (fence it: docs/postgresql.md)";
    stale_at_ = std::chrono::steady_clock::now();
    return Unavailable("refusing " + stale_);
  }
  system_ = system;
  timeline_ = std::max(timeline_, timeline);
  return Status::Ok();
}

bool PostgresStore::PrimaryFence::Behind(int64_t timeline) const {
  MutexLock l(mu_);
  return timeline > 0 && timeline < timeline_;
}

std::string PostgresStore::PrimaryFence::Stale() const {
  MutexLock l(mu_);
  if (std::chrono::steady_clock::now() - stale_at_ > std::chrono::minutes(1)) return "";
  return stale_;
}

namespace {

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The hosts and ports a URI names, in its order ("" ports: the default).
std::vector<std::pair<std::string, std::string>> HostsOf(const std::string& uri) {
  std::vector<std::pair<std::string, std::string>> out;
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(uri.c_str(), &err);
  if (err) PQfreemem(err);
  if (!opts) return out;
  std::string hosts, ports;
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (!o->val) continue;
    if (std::strcmp(o->keyword, "host") == 0) hosts = o->val;
    if (std::strcmp(o->keyword, "port") == 0) ports = o->val;
  }
  PQconninfoFree(opts);
  auto split = [](const std::string& s) {
    std::vector<std::string> v;
    size_t from = 0;
    while (true) {
      size_t comma = s.find(',', from);
      v.push_back(s.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
    return v;
  };
  std::vector<std::string> h = split(hosts), p = split(ports);
  for (size_t i = 0; i < h.size(); ++i)
    out.push_back({h[i], p.size() == h.size() ? p[i] : p.size() == 1 ? p[0] : ""});
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<PostgresStore::Connection>> PostgresStore::Connection::Connect(
    const std::string& uri, const std::string& host, const std::string& port) {
  std::unique_ptr<Connection> c(new Connection());
  // Keywords before "dbname" are defaults the URI may override (sagad's
  // timeouts and keepalives); those after it override the URI (its host,
  // when each is tried in turn). The URI (and so PGPASSWORD, ~/.pgpass)
  // supplies the rest. With several hosts (a primary and its standbys),
  // the one that takes writes: libpq tries them in turn, unless the URI
  // says otherwise.
  const bool choose = uri.find("target_session_attrs") == std::string::npos;
  std::vector<const char*> keys = {
      "connect_timeout",  "keepalives",       "keepalives_idle",  "keepalives_interval",
      "keepalives_count", "tcp_user_timeout", "application_name", "dbname"};
  std::vector<const char*> values = {"2", "1", "5", "2", "3", "10000", "sagad", uri.c_str()};
  if (choose) {
    keys.push_back("target_session_attrs");
    values.push_back("read-write");
  }
  if (!host.empty()) {
    keys.push_back("host");
    values.push_back(host.c_str());
    keys.push_back("port");
    values.push_back(port.empty() ? "5432" : port.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  c->conn_ = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (!c->conn_ || PQstatus(c->conn_) != CONNECTION_OK) {
    std::string why = c->conn_ ? Trimmed(PQerrorMessage(c->conn_)) : "out of memory";
    return Unavailable("cannot connect to " + RedactUri(uri) + ": " + why);
  }
  const char* h = PQhost(c->conn_);
  const char* p = PQport(c->conn_);
  c->server_ = std::string(h ? h : "?") + ":" + (p ? p : "?");
  // Every wait on this socket is polled from now on: Await.
  if (PQsetnonblocking(c->conn_, 1) != 0)
    return Unavailable("postgresql: cannot make the connection non-blocking");
  auto set = c->Exec("SET statement_timeout = " + std::to_string(kServerStatementTimeoutMs) +
                     "; SET lock_timeout = " + std::to_string(kServerLockTimeoutMs) +
                     "; SET idle_in_transaction_session_timeout = '60s'");
  if (!set.ok()) return set.status();
  return c;
}

void PostgresStore::Connection::Identity(std::string* system, int64_t* timeline) {
  *system = "";
  *timeline = 0;
  // The timeline of the current WAL insert position: the first 8 hex digits
  // of its segment's name. pg_control_system() may be refused to a role
  // without pg_monitor: then nothing is learnt (and nothing fenced).
  auto r = Exec(
      "SELECT (SELECT system_identifier::text FROM pg_control_system()), "
      "('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint");
  if (!r.ok() || r->rows() != 1) return;
  *system = r->get(0, 0);
  *timeline = std::atoll(r->get(0, 1).c_str());
}

StatusOr<std::unique_ptr<PostgresStore::Connection>> PostgresStore::Connection::Open(
    const std::string& uri, PrimaryFence* fence, const std::string& suspect) {
  auto admitted =
      [&](StatusOr<std::unique_ptr<Connection>> c) -> StatusOr<std::unique_ptr<Connection>> {
    if (!c.ok() || !fence) return c;
    std::string system;
    int64_t timeline = 0;
    (*c)->Identity(&system, &timeline);
    Status s = fence->Admit(system, timeline, "the primary at " + (*c)->server());
    if (!s.ok()) {
      EngineLog(LogLevel::kWarn, {{"msg", "old primary refused"}, {"error", s.message()}});
      return s;
    }
    (*c)->timeline_ = timeline;
    return c;
  };
  const auto hosts = HostsOf(uri);
  if (!suspect.empty() && hosts.size() > 1) {
    // The others first, one by one; the suspect last.
    Status last = Unavailable("no host of " + RedactUri(uri) + " could be reached");
    for (int round = 0; round < 2; ++round)
      for (const auto& [host, port] : hosts) {
        if ((host + ":" + (port.empty() ? "5432" : port) == suspect) != (round == 1)) continue;
        auto c = admitted(Connect(uri, host, port));
        if (c.ok()) return c;
        last = c.status();
      }
    return last;
  }
  auto c = admitted(Connect(uri, "", ""));
  if (c.ok() || c.status().message().rfind("refusing ", 0) != 0) return c;
  // The first primary found is an old one: each other host in turn.
  Status refused = c.status();
  for (const auto& [host, port] : hosts) {
    auto other = admitted(Connect(uri, host, port));
    if (other.ok()) return other;
  }
  return refused;
}

StatusOr<PgRows> PostgresStore::Connection::Await(int sent) {
  if (!conn_) return Unavailable("postgresql: the connection was dropped");
  if (!sent) return Check(nullptr);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kStatementDeadlineMs);
  PGresult* kept = nullptr;  // the last result, or the first error
  auto keep = [&kept](PGresult* r) {
    const ExecStatusType st = PQresultStatus(r);
    const bool error = st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK;
    const bool kept_error =
        kept && PQresultStatus(kept) != PGRES_COMMAND_OK && PQresultStatus(kept) != PGRES_TUPLES_OK;
    if (kept_error && !error) return PQclear(r);
    PQclear(kept);
    kept = r;
  };
  while (true) {
    const int flushing = PQflush(conn_);  // 1: bytes still to send
    if (flushing < 0) break;
    if (!PQconsumeInput(conn_)) break;
    while (!PQisBusy(conn_)) {
      PGresult* r = PQgetResult(conn_);
      if (!r) return Check(kept);  // every result of the statement is in
      keep(r);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      PQclear(kept);
      Drop();  // nothing more can be read of this connection safely
      return Unavailable("postgresql: no answer within " + std::to_string(kStatementDeadlineMs) +
                         " ms; the connection was dropped");
    }
    pollfd p{PQsocket(conn_), static_cast<short>(POLLIN | (flushing == 1 ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000))) < 0 &&
        errno != EINTR)
      break;
  }
  PQclear(kept);
  return Check(nullptr);  // the connection failed: its message says why
}

StatusOr<PgRows> PostgresStore::Connection::Exec(const std::string& sql) {
  if (!conn_) return Unavailable("postgresql: the connection was dropped");
  return Await(PQsendQuery(conn_, sql.c_str()));
}

StatusOr<PgRows> PostgresStore::Connection::Run(const char* name,
                                                const std::vector<std::string>& params) {
  if (!conn_) return Unavailable("postgresql: the connection was dropped");
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  const Statement* st = nullptr;
  for (const auto& s : kStatements)
    if (std::strcmp(s.name, name) == 0) st = &s;
  if (st && !prepared_) {
    for (const auto& s : kStatements) {
      auto r = Await(PQsendPrepare(conn_, s.name, s.sql, 0, nullptr));
      if (!r.ok()) return r.status();
    }
    prepared_ = true;
  }
  return Await(
      st ? PQsendQueryPrepared(conn_, name, int(values.size()), values.data(), nullptr, nullptr, 0)
         : PQsendQueryParams(conn_, name, int(values.size()), nullptr, values.data(), nullptr,
                             nullptr, 0));
}

StatusOr<PgRows> PostgresStore::Connection::Check(PGresult* raw) {
  PgRows r(raw);
  ExecStatusType st = raw ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
  const char* state = raw ? PQresultErrorField(raw, PG_DIAG_SQLSTATE) : nullptr;
  std::string msg = raw ? PQresultErrorMessage(raw) : conn_ ? PQerrorMessage(conn_) : "";
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (Broken() || IsConnectionTrouble(state)) return Unavailable("postgresql: " + msg);
  // A value the database refused (a data exception, a constraint): the
  // write's own content, which retrying cannot change.
  if (state && (std::strncmp(state, "22", 2) == 0 || std::strncmp(state, "23", 2) == 0))
    return Internal("postgresql: " + msg);
  // Anything else is the database's side (a schema changed under sagad, a
  // resource or server failure): 503, with the SQL in the log only.
  return StoreFault("PostgreSQL", std::string("SQLSTATE ") + (state ? state : "?") + ": " + msg);
}

}  // namespace sagad
