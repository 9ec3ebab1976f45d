// A throw-away PostgreSQL server for tests: initdb into a temp dir, a free
// port on 127.0.0.1, pg_ctl start; stopped and removed at exit. As root
// (CI), it runs as Debian's `postgres` system user, which owns the dir:
// PostgreSQL refuses to run as root. It may run in a network namespace
// (tests/testing/netns.h).
#pragma once

#include <memory>
#include <string>

namespace sagad::testing {

class NetNs;

class PostgresServer {
 public:
  // The server of this test binary, started on first use. Aborts the test
  // binary (with the server's log) if it cannot start.
  static PostgresServer& Shared();
  // A server of the test's own. `conf` is added to its configuration. With
  // `standby_of` (a running server), a streaming standby of it, made by
  // pg_basebackup, that connects as `application_name` `standby_name`.
  // With `ns`, the server runs in that network namespace and listens on its
  // address (host()), so NetNs::Cut can make its host vanish.
  explicit PostgresServer(const std::string& conf = "", const PostgresServer* standby_of = nullptr,
                          const std::string& standby_name = "", const NetNs* ns = nullptr);
  ~PostgresServer();

  int port() const { return port_; }
  // The address it listens on: 127.0.0.1, or its namespace's.
  const std::string& host() const { return host_; }
  // A new, empty database; returns its URI.
  std::string NewDatabase();
  // pg_ctl restart -m immediate: a crash of the server, in-flight
  // transactions lost, committed ones kept.
  void RestartImmediately();
  void Stop();
  void Start();
  // SIGKILL of every process of the server (its host dying). It is not
  // started again.
  void Kill();
  // pg_ctl promote of a standby; returns once it takes writes.
  void Promote();
  // The first column of the first row of `sql` in database `db` ("" if
  // none; the query's error if it failed, prefixed "error: ").
  std::string QueryValue(const std::string& db, const std::string& sql) const;

 private:
  std::string Run(const std::string& cmd);  // as the server's user; aborts on failure
  std::string dir_, bin_, as_user_;
  std::string host_ = "127.0.0.1";
  std::string ns_prefix_;  // runs a command in its namespace ("" if none)
  int port_ = -1;
  int databases_ = 0;
  bool killed_ = false;
};

}  // namespace sagad::testing
