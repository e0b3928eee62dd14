// A PostgreSQL server for a test, from Debian's binaries (/usr/lib/postgresql/<version>/bin): a
// cluster made by initdb in a scratch folder, started on a free local port with its unix socket
// in that folder, stopped and deleted with the object. PostgreSQL refuses to run as root, so
// under uid 0 the server runs as the `postgres` user (runuser), owning the scratch folder.
// When it cannot start, skip_reason() says why, for KILN_SERVER_UNAVAILABLE (server_unavailable.h).
// query() reads a store through libpq itself, not through Kiln's store layer.
#pragma once

#include <libpq-fe.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "test_util.h"

namespace kiln::testing {

class PostgresServer {
 public:
  // `password`: the server asks TCP clients for it (scram-sha-256); empty: it trusts them.
  explicit PostgresServer(const std::string& password = "") {
    bin_ = find_bin();
    if (bin_.empty()) {
      skip_ = "no PostgreSQL server binaries in /usr/lib/postgresql (tools/setup.sh --tests)";
      return;
    }
    as_user_ = ::getuid() == 0 ? "runuser -u postgres -- " : "";
    if (::getuid() == 0 && std::system("id postgres >/dev/null 2>&1") != 0) {
      skip_ = "running as root and there is no postgres user to run the server as";
      return;
    }
    dir_ = std::filesystem::temp_directory_path() / fmt::format("kiln-pg-{}", ::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    if (::getuid() == 0) shell("chown postgres " + dir_.string());
    std::string auth = "--auth=trust";
    if (!password.empty()) {
      write_text(dir_ / "pw", password + "\n");
      shell("chmod 644 " + (dir_ / "pw").string());
      auth = "--auth-local=trust --auth-host=scram-sha-256 --pwfile=" + (dir_ / "pw").string();
    }
    if (!shell(fmt::format("{}{}/initdb -D {}/data -U kiln -E UTF8 --no-locale {}", as_user_, bin_,
                           dir_.string(), auth))) {
      skip_ = "initdb failed: " + read_file(dir_ / "log");
      return;
    }
    port_ = free_local_port();
    start();
  }

  ~PostgresServer() {
    if (started_) stop();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  const std::string& skip_reason() const { return skip_; }

  // pg_ctl start and stop, waiting for either: for the tests that take the server away.
  void start() {
    started_ =
        shell(fmt::format("{}{}/pg_ctl -D {}/data -l {}/server.log -w -t 60 -o \"-p {} -k {} -c "
                          "listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200\" start",
                          as_user_, bin_, dir_.string(), dir_.string(), port_, dir_.string()));
    if (!started_) skip_ = "the server did not start: " + read_file(dir_ / "server.log");
  }
  void stop() {
    shell(fmt::format("{}{}/pg_ctl -D {}/data -w -m fast stop", as_user_, bin_, dir_.string()));
    started_ = false;
  }

  // A new empty database, and its URL for run.db.
  std::string new_database(const std::string& name) {
    shell(fmt::format("{}{}/createdb -h {} -p {} -U kiln {}", as_user_, bin_, dir_.string(), port_,
                      name));
    return url(name);
  }
  std::string url(const std::string& database, const std::string& user = "kiln") const {
    return fmt::format("postgresql://{}@127.0.0.1:{}/{}", user, port_, database);
  }
  int port() const { return port_; }

 private:
  static std::string find_bin() {
    std::error_code ec;
    for (const char* version : {"15", "16", "17", "14", "13"}) {
      const std::string bin = std::string("/usr/lib/postgresql/") + version + "/bin";
      if (std::filesystem::exists(bin + "/initdb", ec)) return bin;
    }
    return "";
  }

  bool shell(const std::string& command) {
    return std::system((command + " >>" + (dir_ / "log").string() + " 2>&1").c_str()) == 0;
  }

  std::string bin_, as_user_, skip_;
  std::filesystem::path dir_;
  int port_ = 0;
  bool started_ = false;
};

// Every row of a query on a store, each column as text ("NULL" for null): SQLite through
// test_util.h's query(), PostgreSQL through libpq.
inline std::vector<std::vector<std::string>> store_query(const std::string& db,
                                                         const std::string& sql) {
  if (db.rfind("postgresql://", 0) != 0) return query(db, sql);
  PGconn* conn = PQconnectdb(db.c_str());
  PGresult* result = PQexec(conn, sql.c_str());
  std::vector<std::vector<std::string>> rows;
  for (int r = 0; PQresultStatus(result) == PGRES_TUPLES_OK && r < PQntuples(result); ++r) {
    std::vector<std::string> row;
    for (int c = 0; c < PQnfields(result); ++c)
      row.emplace_back(PQgetisnull(result, r, c) ? "NULL" : PQgetvalue(result, r, c));
    rows.push_back(std::move(row));
  }
  PQclear(result);
  PQfinish(conn);
  return rows;
}

inline std::string store_scalar(const std::string& db, const std::string& sql) {
  auto rows = store_query(db, sql);
  return rows.empty() || rows[0].empty() ? "" : rows[0][0];
}

}  // namespace kiln::testing
