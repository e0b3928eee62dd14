// The PostgreSQL half of the one store layer (core/store/db/connection.h and statement.h hold
// Connection, Statement and Transaction, which use this for a postgresql:// run.db): a libpq
// session and its statements, which run Kiln's SQL translated into PostgreSQL's dialect
// (core/store/db/postgres_dialect.h), so the store's files carry one SQL text each. Credentials
// come only from libpq (PGPASSWORD, ~/.pgpass, a service file): a URL that carries a password is
// refused (core/store/db/location.h), so none is ever stored in a run's config or printed. No
// LibTorch, and libpq-fe.h stays out of this header.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/store/db/connection.h"
#include "core/store/db/location.h"

struct pg_conn;
struct pg_result;

namespace kiln {

// PostgreSQL's words for a failure, one line; Connection wraps them in its SqliteError.
class PgError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PgResultFree {
  void operator()(pg_result* result) const;
};
using PgResult = std::unique_ptr<pg_result, PgResultFree>;

class PgSession {
 public:
  // A PgError with libpq's reason (one line) when it cannot connect. A read-only session
  // refuses every write (default_transaction_read_only).
  PgSession(const std::string& url, bool read_only);
  ~PgSession();
  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;

  // One or more statements without parameters; a PgError when one fails.
  void exec(const std::string& sql);
  // exec() that reports nothing: for a ROLLBACK in a destructor.
  void exec_quietly(const std::string& sql) noexcept;
  // One statement in PostgreSQL's dialect with its text parameters (null: SQL NULL) and their
  // type oids (0: inferred from the statement).
  PgResult run(const std::string& sql, const std::vector<std::optional<std::string>>& values,
               const std::vector<unsigned>& types);
  // The columns of `table`'s primary key (cached): what INSERT OR REPLACE conflicts on.
  const std::vector<std::string>& primary_key(const std::string& table);
  bool has_table(const std::string& table);
  bool lost() const;  // the connection is broken
  void reconnect();   // a PgError when the server does not answer

 private:
  pg_conn* conn_ = nullptr;
  std::map<std::string, std::vector<std::string>> primary_keys_;
};

// A statement's parameters and its rows, read whole when it first steps.
class PgStatement {
 public:
  PgStatement(PgSession& session, const std::string& sql);

  void bind(int index, const SqlValue& value);  // 1-based
  void bind_null(int index);
  bool step();  // a PgError when it fails
  void reset();

  bool is_null(int column) const;
  std::string text(int column) const;
  int64_t integer(int column) const;
  double real(int column) const;

 private:
  PgSession& session_;
  std::string sql_;
  std::vector<bool> glob_params_;
  std::vector<std::optional<std::string>> values_;
  std::vector<unsigned> types_;
  PgResult result_;
  int row_ = -1;
};

}  // namespace kiln
