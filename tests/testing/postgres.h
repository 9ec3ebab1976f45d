// A throw-away PostgreSQL server for tests: initdb into a temp dir, a free
// port on 127.0.0.1, pg_ctl start; stopped and removed at exit. As root
// (CI), it runs as Debian's `postgres` system user, which owns the dir:
// PostgreSQL refuses to run as root.
#pragma once

#include <memory>
#include <string>

namespace sagad::testing {

class PostgresServer {
 public:
  // The server of this test binary, started on first use. Aborts the test
  // binary (with the server's log) if it cannot start.
  static PostgresServer& Shared();
  ~PostgresServer();

  int port() const { return port_; }
  // A new, empty database; returns its URI.
  std::string NewDatabase();
  // pg_ctl restart -m immediate: a crash of the server, in-flight
  // transactions lost, committed ones kept.
  void RestartImmediately();
  void Stop();
  void Start();

 private:
  PostgresServer();
  std::string Run(const std::string& cmd);  // as the server's user; aborts on failure
  std::string dir_, bin_, as_user_;
  int port_ = -1;
  int databases_ = 0;
};

}  // namespace sagad::testing
