// The one database layer of Kiln: a connection, prepared statements and write transactions, each
// released by its destructor. A run store is an SQLite file, or a PostgreSQL database when run.db
// is a postgresql:// URL (core/store/postgres.h: libpq, and the translation of this SQL into
// PostgreSQL's dialect). Callers write one SQL text, SQLite's, with `?` placeholders. Every
// failure is a SqliteError (a UserError) that names the store and says what the user can do.
// Rules: SQL text is always ours; values reach the database only as bound parameters. No
// LibTorch, and neither sqlite3.h nor libpq-fe.h is included here.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/util/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kiln {

class PgSession;
class PgStatement;
class ScratchDir;

enum class SqlDialect { kSqlite, kPostgres };

// True for a postgresql:// (or postgres://) URL or a libpq key/value connection string
// ("host=db1 dbname=runs"), a PostgreSQL store; anything else is a path.
bool is_database_url(const std::string& location);
// How run.db and --db are kept: a URL as given, a path made absolute. A UserError for a URL of
// another scheme, or one that carries a password (libpq's PGPASSWORD, ~/.pgpass or a service
// file give it: a run's stored config and its console never hold one).
std::string store_location(const std::string& location);
// Whether a command that must not create a store may open `location`: an existing file, or a URL
// (the server answers for it).
bool store_may_exist(const std::string& location);

using SqlValue = std::variant<int64_t, double, std::string>;

// SQL text with `?` placeholders and the values bound to them, in order.
struct SqlFragment {
  std::string sql;
  std::vector<SqlValue> params;
};

// what(): the whole line for the user. reason(): SQLite's own words, for a caller that wraps
// them in a message of its own.
class SqliteError : public UserError {
 public:
  SqliteError(const std::string& message, std::string reason)
      : UserError(message), reason_(std::move(reason)) {}
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

enum class OpenMode {
  kReadOnly,  // must exist; SQLite never writes it (a store on a read-only disk or copy)
  kExisting,  // must exist: a mistyped path is an error, not a new empty store
  kCreate,    // created when missing
};

class Connection {
 public:
  // A SqliteError "cannot open run store '<path>': <why>: <open_hint>" when SQLite cannot open it;
  // one that says the store is read-only when a mode that writes meets a file or folder it may
  // not write (SQLite makes its -wal and -shm files beside the file).
  Connection(std::string path, OpenMode mode, const std::string& open_hint);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // How long a statement waits for another process's write before it fails.
  void set_busy_timeout(std::chrono::milliseconds wait);
  // Ends every later failure's message: "run store '<path>': <why>: <hint>" (empty: no hint).
  void set_failure_hint(std::string hint) { failure_hint_ = std::move(hint); }

  // Runs one or more statements that return no rows.
  void exec(const std::string& sql);
  // What a writer sets once: SQLite's WAL journal, its sync level and foreign keys (PostgreSQL
  // has them always), and how long it waits for another writer.
  void prepare_writer();
  // The migrations applied: SQLite's PRAGMA user_version, PostgreSQL's kiln_schema table. Set
  // it inside the migration's Transaction.
  int64_t schema_version();
  void set_schema_version(int64_t version);
  // A migration's DDL, written for SQLite (types mapped for PostgreSQL).
  void apply_migration(const std::string& sqlite_sql);

  SqlDialect dialect() const { return pg_ ? SqlDialect::kPostgres : SqlDialect::kSqlite; }
  const std::string& path() const { return path_; }
  // SQLite's handle, for what this layer does not wrap (SQL functions); null on PostgreSQL.
  sqlite3* handle() const { return db_; }
  PgSession* postgres() const { return pg_.get(); }
  // Throws the SqliteError for SQLite's latest error on this connection, or for `why`.
  [[noreturn]] void fail() const;
  [[noreturn]] void fail(const std::string& why) const;
  // ROLLBACK, reporting nothing (a destructor's).
  void rollback_quietly() noexcept;
  // PostgreSQL: the connection to the server is broken (a restart, a network cut); reconnect()
  // tries again, a SqliteError when the server does not answer. Never on SQLite.
  bool lost() const;
  void reconnect();

 private:
  // sqlite3_open_v2 of `name` (the path, or a URI for it) into db_, or the SqliteError.
  void open(const std::string& name, int flags, const std::string& open_hint);
  SqliteError failure(const std::string& why) const;

  // A read-only store in a folder this process cannot write whose -wal file holds commits: read
  // through a private copy of the two, or immutable (the WAL's rows unseen) when none can be made.
  void open_unwritable_folder(int flags, const std::string& open_hint);

  std::string path_;
  std::string failure_hint_;
  sqlite3* db_ = nullptr;
  std::unique_ptr<PgSession> pg_;
  std::unique_ptr<ScratchDir> private_copy_;  // the copy open_unwritable_folder reads, if any
};

// A prepared statement. Parameters are 1-based, as SQLite counts them; rows are read with step().
// On PostgreSQL `?` and `?N` become `$n`, values go as bound parameters, and the rows come whole.
class Statement {
 public:
  // `params` are bound in order, from parameter 1.
  Statement(Connection& db, const std::string& sql, const std::vector<SqlValue>& params = {});
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, int64_t value) { return bind(index, SqlValue(value)); }
  Statement& bind(int index, double value) { return bind(index, SqlValue(value)); }
  Statement& bind(int index, std::optional<double> value);  // NULL when empty
  Statement& bind(int index, const std::string& value) { return bind(index, SqlValue(value)); }
  Statement& bind(int index, const SqlValue& value);
  Statement& bind_null(int index);
  Statement& bind_text_or_null(int index, const std::string& value);  // NULL when empty

  // True with a row to read, false when done; a SqliteError when the statement fails.
  bool step();
  // Ready to step again, every parameter NULL.
  void reset();

  bool is_null(int column) const;
  int64_t integer(int column) const;  // 0 for NULL
  // Exactly as stored (no text round trip); NaN for NULL, which is also how SQLite keeps a NaN.
  double real(int column) const;
  std::optional<double> maybe_real(int column) const;
  std::optional<int64_t> maybe_integer(int column) const;
  std::string text(int column) const;  // "" for NULL

 private:
  Statement& check(int rc);

  Connection& db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::unique_ptr<PgStatement> pg_;
};

// BEGIN IMMEDIATE now (the write lock taken up front, so two writers never deadlock upgrading a
// read; on PostgreSQL: BEGIN and the store's advisory write lock, so writers take turns there
// too, and each migration is applied once however many processes start together); ROLLBACK
// when destroyed without commit(), as when an exception passes through.
class Transaction {
 public:
  explicit Transaction(Connection& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit();

 private:
  Connection& db_;
  bool done_ = false;
};

}  // namespace kiln
