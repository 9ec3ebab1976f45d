#include "coordinator/store/postgres/postgres_connection.h"

#include <cstring>

#include "coordinator/store/store_fault.h"

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

PostgresStore::Connection::~Connection() {
  if (conn_) PQfinish(conn_);
}

StatusOr<std::unique_ptr<PostgresStore::Connection>> PostgresStore::Connection::Open(
    const std::string& uri) {
  std::unique_ptr<Connection> c(new Connection());
  // Keywords after "dbname" override what the URI says; the URI (and so
  // PGPASSWORD, ~/.pgpass) supplies the rest.
  // With several hosts (a primary and its standbys), the one that takes
  // writes: libpq tries them in turn. The URI may say otherwise.
  const bool choose = uri.find("target_session_attrs") == std::string::npos;
  const char* keys[] = {"dbname",
                        "connect_timeout",
                        "keepalives",
                        "keepalives_idle",
                        "keepalives_interval",
                        "keepalives_count",
                        "application_name",
                        choose ? "target_session_attrs" : nullptr,
                        nullptr};
  const char* values[] = {uri.c_str(), "5", "1", "5", "2", "3", "sagad", "read-write", nullptr};
  c->conn_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (!c->conn_ || PQstatus(c->conn_) != CONNECTION_OK) {
    std::string why = c->conn_ ? PQerrorMessage(c->conn_) : "out of memory";
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return Unavailable("cannot connect to " + RedactUri(uri) + ": " + why);
  }
  auto set = c->Exec(
      "SET statement_timeout = '30s'; SET lock_timeout = '10s'; "
      "SET idle_in_transaction_session_timeout = '60s'");
  if (!set.ok()) return set.status();
  return c;
}

StatusOr<PgRows> PostgresStore::Connection::Exec(const std::string& sql) {
  return Check(PQexec(conn_, sql.c_str()));
}

StatusOr<PgRows> PostgresStore::Connection::Run(const char* name,
                                                const std::vector<std::string>& params) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  const Statement* st = nullptr;
  for (const auto& s : kStatements)
    if (std::strcmp(s.name, name) == 0) st = &s;
  if (st && !prepared_) {
    for (const auto& s : kStatements) {
      auto r = Check(PQprepare(conn_, s.name, s.sql, 0, nullptr));
      if (!r.ok()) return r.status();
    }
    prepared_ = true;
  }
  PGresult* r =
      st ? PQexecPrepared(conn_, name, int(values.size()), values.data(), nullptr, nullptr, 0)
         : PQexecParams(conn_, name, int(values.size()), nullptr, values.data(), nullptr, nullptr,
                        0);
  return Check(r);
}

StatusOr<PgRows> PostgresStore::Connection::Check(PGresult* raw) {
  PgRows r(raw);
  ExecStatusType st = raw ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
  const char* state = raw ? PQresultErrorField(raw, PG_DIAG_SQLSTATE) : nullptr;
  std::string msg = raw ? PQresultErrorMessage(raw) : PQerrorMessage(conn_);
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
