// Private to the PostgreSQL store's files: one libpq connection with
// sagad's statements prepared on it (kStatements, postgres_connection.cc),
// and what a failed statement means (Unavailable for connection trouble: the
// caller reconnects; Internal for a value the database refused; a
// StoreFault for the rest).
//
// No thread waits on the database without a deadline: every statement is
// sent asynchronously and its socket polled for at most kStatementDeadline
// (the server's statement_timeout, kServerStatementTimeout, plus a margin:
// normally the server cancels first, with a clean error); past it the
// connection is dropped and the statement is Unavailable (its outcome
// unknown to the caller, as a broken connection's). Connecting is bounded
// by connect_timeout per host, and a connection whose sent bytes go
// unacknowledged (a host that vanished: no reset) by tcp_user_timeout and
// keepalives: defaults the URI may override (docs/postgresql.md).
//
// PrimaryFence: never go back to an old primary. Each connection learns
// its server's system identifier and timeline; the fence keeps the newest
// timeline this process has written to, and a server of another system or
// of an older timeline (an old primary that came back read-write after a
// promotion) is refused: the other hosts of the URI are tried instead.
// Thread-safety: Connection, one thread at a time (the store's pool hands
// it out); PrimaryFence, any thread.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/store/postgres/postgres_rows.h"
#include "coordinator/store/postgres/postgres_store.h"
#include "util/mutex.h"

namespace sagad {

// The server-side statement_timeout and lock_timeout every connection sets,
// and how long a statement may go unanswered before its connection is
// dropped.
constexpr int kServerStatementTimeoutMs = 5000;
constexpr int kServerLockTimeoutMs = 3000;
constexpr int kStatementDeadlineMs = kServerStatementTimeoutMs + 1000;

class PostgresStore::PrimaryFence {
 public:
  // Whether a server of `system` at `timeline` may be written to; if so,
  // it is remembered (the newest one seen). "" and 0 (not learnt: a role
  // without the right to ask) pass without changing anything.
  Status Admit(const std::string& system, int64_t timeline, const std::string& where);
  // Whether a server admitted at `timeline` is behind the newest one seen
  // since: a pooled connection to it is dropped, never used again.
  bool Behind(int64_t timeline) const;
  // The last refusal, for a minute after it ("" when none): an old
  // primary is up and must be fenced (sagad_store_stale_primary). When no
  // host is admitted, connecting fails with it, and /readyz names it.
  std::string Stale() const;

 private:
  mutable Mutex mu_;
  std::string system_ GUARDED_BY(mu_);
  int64_t timeline_ GUARDED_BY(mu_) = 0;
  std::string stale_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point stale_at_ GUARDED_BY(mu_);
};

class PostgresStore::Connection {
 public:
  ~Connection();
  // Connects (with sagad's timeouts and keepalives; to the host that takes
  // writes when the URI names several, unless it sets
  // target_session_attrs) to a server `fence` admits (each host of the
  // URI in turn when the first found is not); Unavailable if no host could
  // be reached, or none is admitted. `suspect` ("host:port", may be empty):
  // a server whose connection was just lost; the URI's other hosts are
  // tried before it (each would otherwise cost a connect timeout first).
  static StatusOr<std::unique_ptr<Connection>> Open(const std::string& uri, PrimaryFence* fence,
                                                    const std::string& suspect = "");
  // "host:port" of the server (kept after the connection is dropped).
  const std::string& server() const { return server_; }
  // The server's timeline when it was admitted (0: not learnt).
  int64_t timeline() const { return timeline_; }
  bool Broken() const { return !conn_ || PQstatus(conn_) != CONNECTION_OK; }

  // A statement without parameters (several allowed: the last result, or
  // the first error).
  StatusOr<PgRows> Exec(const std::string& sql);

  // A statement with text parameters: prepared once per connection when it
  // is one of kStatements, else sent as is.
  StatusOr<PgRows> Run(const char* name, const std::vector<std::string>& params);

  // The server's system identifier and current timeline ("" and 0 when
  // this role may not read them).
  void Identity(std::string* system, int64_t* timeline);

 private:
  Connection() = default;
  // One connection attempt: the URI, with `host` and `port` (when not
  // empty) in place of its hosts.
  static StatusOr<std::unique_ptr<Connection>> Connect(const std::string& uri,
                                                       const std::string& host,
                                                       const std::string& port);
  // Waits (at most kStatementDeadlineMs) for the answer of what was just
  // sent (`sent`: PQsend*'s return); the connection is dropped when none
  // comes in time.
  StatusOr<PgRows> Await(int sent);
  StatusOr<PgRows> Check(PGresult* raw);
  void Drop();

  PGconn* conn_ = nullptr;
  bool prepared_ = false;
  std::string server_;
  int64_t timeline_ = 0;
};

}  // namespace sagad
