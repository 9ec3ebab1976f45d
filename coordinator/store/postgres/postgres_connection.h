// Private to the PostgreSQL store's files: one libpq connection with
// sagad's statements prepared on it (kStatements, postgres_connection.cc),
// and what a failed statement means (Unavailable for connection trouble: the
// caller reconnects; Internal for a value the database refused; a
// StoreFault for the rest).
// Thread-safety: one thread at a time (the store's pool hands it out).
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <vector>

#include "coordinator/store/postgres/postgres_rows.h"
#include "coordinator/store/postgres/postgres_store.h"

namespace sagad {

class PostgresStore::Connection {
 public:
  ~Connection();
  // Connects (with sagad's timeouts and keepalives; to the host that takes
  // writes when the URI names several, unless it sets
  // target_session_attrs); Unavailable if no host could be reached.
  static StatusOr<std::unique_ptr<Connection>> Open(const std::string& uri);
  bool Broken() const { return !conn_ || PQstatus(conn_) != CONNECTION_OK; }

  // A statement without parameters (several allowed).
  StatusOr<PgRows> Exec(const std::string& sql);

  // A statement with text parameters: prepared once per connection when it
  // is one of kStatements, else sent as is.
  StatusOr<PgRows> Run(const char* name, const std::vector<std::string>& params);

 private:
  Connection() = default;
  StatusOr<PgRows> Check(PGresult* raw);

  PGconn* conn_ = nullptr;
  bool prepared_ = false;
};

}  // namespace sagad
