// The one SQLite layer of Kiln: a connection, prepared statements and write transactions, each
// released by its destructor. Every SQLite file Kiln opens is a run store, so every failure is a
// SqliteError (a UserError) that names the store's path and says what the user can do.
// Rules: SQL text is always ours; values reach SQLite only as bound parameters. No LibTorch, and
// sqlite3.h stays out of this header.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/util/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kiln {

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
  int64_t last_insert_rowid() const;

  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }  // for what this layer does not wrap (SQL functions)
  // Throws the SqliteError for SQLite's latest error on this connection.
  [[noreturn]] void fail() const;

 private:
  // sqlite3_open_v2 of `name` (the path, or a URI for it) into db_, or the SqliteError.
  void open(const std::string& name, int flags, const std::string& open_hint);
  SqliteError failure(const std::string& why) const;

  std::string path_;
  std::string failure_hint_;
  sqlite3* db_ = nullptr;
};

// A prepared statement. Parameters are 1-based, as SQLite counts them; rows are read with step().
class Statement {
 public:
  // `params` are bound in order, from parameter 1.
  Statement(Connection& db, const std::string& sql, const std::vector<SqlValue>& params = {});
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, std::optional<double> value);  // NULL when empty
  Statement& bind(int index, const std::string& value);
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
};

// BEGIN IMMEDIATE now (the write lock taken up front, so two writers never deadlock upgrading a
// read); ROLLBACK when destroyed without commit(), as when an exception passes through.
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
