#include "tests/testing/postgres.h"

#include <arpa/inet.h>
#include <glob.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "tests/testing/netns.h"
#include "tests/testing/subprocess.h"

namespace sagad::testing {
namespace {

std::string PgBinDir() {
  glob_t g;
  std::string out;
  if (glob("/usr/lib/postgresql/*/bin/pg_ctl", 0, nullptr, &g) == 0 && g.gl_pathc > 0) {
    out = g.gl_pathv[g.gl_pathc - 1];
    out = out.substr(0, out.rfind('/'));
  }
  globfree(&g);
  if (out.empty()) {
    std::cerr << "PostgreSQL server binaries not found (apt-get install postgresql-15)\n";
    std::abort();
  }
  return out;
}

}  // namespace

PostgresServer& PostgresServer::Shared() {
  static PostgresServer* server = new PostgresServer("");
  static struct Stopper {
    ~Stopper() { delete server; }
  } stopper;
  return *server;
}

PostgresServer::PostgresServer(const std::string& conf, const PostgresServer* standby_of,
                               const std::string& standby_name, const NetNs* ns)
    : bin_(PgBinDir()) {
  if (ns) {
    host_ = ns->inner();
    ns_prefix_ = ns->Prefix();
  }
  char tmpl[] = "/tmp/sagad-pg-XXXXXX";
  dir_ = mkdtemp(tmpl);
  if (getuid() == 0) {
    passwd* pw = getpwnam("postgres");
    if (!pw) {
      std::cerr << "running as root but there is no 'postgres' user to run PostgreSQL as\n";
      std::abort();
    }
    if (chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) std::abort();
    as_user_ = "runuser -u postgres -- ";
  }
  if (standby_of) {
    Run(bin_ + "/pg_basebackup -h " + standby_of->host() + " -p " +
        std::to_string(standby_of->port()) + " -U postgres -D " + dir_ + "/data -X stream -R >" +
        dir_ + "/initdb.log 2>&1");
  } else {
    Run(bin_ + "/initdb -D " + dir_ + "/data -U postgres -A trust -E UTF8 --no-sync >" + dir_ +
        "/initdb.log 2>&1");
  }
  if (ns) {  // reached over the namespace's link: from 10/8, not loopback
    std::ofstream hba(dir_ + "/data/pg_hba.conf", std::ios::app);
    hba << "host all all 10.0.0.0/8 trust\nhost replication all 10.0.0.0/8 trust\n";
  }
  port_ = FreePort();
  // Later lines win: a standby's copy of its primary's settings is overridden.
  std::ofstream out(dir_ + "/data/postgresql.auto.conf", std::ios::app);
  out << "port = " << port_ << "\nlisten_addresses = '" << host_ << "'\nunix_socket_directories = '"
      << dir_ << "'\nmax_connections = 300\nfsync = on\nsynchronous_commit = on\n"
      << conf << "\n";
  if (standby_of)
    out << "primary_conninfo = 'host=" << standby_of->host() << " port=" << standby_of->port()
        << " user=postgres application_name=" << standby_name << "'\n";
  out.close();
  Start();
}

PostgresServer::~PostgresServer() {
  if (!killed_)
    std::system((ns_prefix_ + as_user_ + bin_ + "/pg_ctl -D " + dir_ +
                 "/data -m immediate stop >/dev/null 2>&1")
                    .c_str());
  std::system(("rm -rf " + dir_).c_str());
}

std::string PostgresServer::Run(const std::string& cmd) {
  int rc = std::system((ns_prefix_ + as_user_ + cmd).c_str());
  if (rc != 0) {
    std::stringstream ss;
    for (const char* f : {"/pg_ctl.log", "/server.log"}) {
      std::ifstream log(dir_ + f);
      ss << log.rdbuf();
    }
    std::cerr << "failed (" << rc << "): " << cmd << "\n" << ss.str() << "\n";
    std::abort();
  }
  return "";
}

void PostgresServer::Start() {
  // In a session of its own: no signal meant for the test's process group
  // reaches the server.
  Run("setsid -w " + bin_ + "/pg_ctl -D " + dir_ + "/data -l " + dir_ +
      "/server.log -w -t 60 start >>" + dir_ + "/pg_ctl.log 2>&1");
}

void PostgresServer::Stop() {
  Run(bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate -w stop >>" + dir_ + "/pg_ctl.log 2>&1");
}

void PostgresServer::Kill() {
  std::ifstream pidfile(dir_ + "/data/postmaster.pid");
  pid_t pid = 0;
  pidfile >> pid;
  if (pid <= 0) return;
  // The postmaster first, so that it starts no process in its children's
  // place; then the children (backends, WAL writer...) it leaves behind.
  std::system(("kill -KILL " + std::to_string(pid) + "; pkill -KILL -P " + std::to_string(pid) +
               " 2>/dev/null")
                  .c_str());
  killed_ = true;
}

void PostgresServer::Promote() {
  Run(bin_ + "/pg_ctl -D " + dir_ + "/data -w -t 60 promote >>" + dir_ + "/pg_ctl.log 2>&1");
}

std::string PostgresServer::QueryValue(const std::string& db, const std::string& sql) const {
  std::string uri = "postgresql://postgres@" + host_ + ":" + std::to_string(port_) + "/" + db +
                    "?connect_timeout=5";
  PGconn* c = PQconnectdb(uri.c_str());
  std::string out;
  if (PQstatus(c) != CONNECTION_OK) {
    out = std::string("error: ") + PQerrorMessage(c);
  } else {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
      out = std::string("error: ") + PQerrorMessage(c);
    else if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
      out = PQgetvalue(r, 0, 0);
    PQclear(r);
  }
  PQfinish(c);
  return out;
}

void PostgresServer::RestartImmediately() {
  Stop();
  Start();
}

std::string PostgresServer::NewDatabase() {
  std::string name = "t" + std::to_string(getpid()) + "_" + std::to_string(++databases_);
  std::string admin = "postgresql://postgres@" + host_ + ":" + std::to_string(port_) + "/postgres";
  PGconn* c = PQconnectdb(admin.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    std::cerr << "cannot connect to the test server: " << PQerrorMessage(c) << "\n";
    std::abort();
  }
  PGresult* r = PQexec(c, ("CREATE DATABASE " + name).c_str());
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  PQfinish(c);
  if (!ok) throw std::runtime_error("CREATE DATABASE failed");
  return "postgresql://postgres@" + host_ + ":" + std::to_string(port_) + "/" + name;
}

}  // namespace sagad::testing
