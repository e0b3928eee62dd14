// The one database layer of Kiln: a connection, prepared statements and write transactions, each
// released by its destructor. A run store is an SQLite file, or a PostgreSQL database when run.db
// is a postgresql:// URL (core/store/db/postgres.h: libpq, and the translation of this SQL into
// PostgreSQL's dialect). Callers write one SQL text, SQLite's, with `?` placeholders. Every
// failure is a SqliteError (a UserError) that names the store and says what the user can do.
// Rules: SQL text is always ours; values reach the database only as bound parameters. No
// LibTorch, and neither sqlite3.h nor libpq-fe.h is included here. This file holds Connection;
// Statement and Transaction are in core/store/db/statement.h, and the checks on a store's
// location in core/store/db/location.h, both included here for the callers.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/store/db/location.h"
#include "core/store/db/statement.h"
#include "core/util/error.h"

struct sqlite3;

namespace kiln {

class PgSession;
class ScratchDir;

enum class SqlDialect { kSqlite, kPostgres };

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

}  // namespace kiln
