// The statements of the one database layer (core/store/db/connection.h): a prepared statement
// with its bound values, and a write transaction, each released by its destructor. Separate from
// Connection because they only use one: a caller that runs SQL reaches them through
// connection.h, which includes this file. Values reach the database only as bound parameters.
// No LibTorch, and neither sqlite3.h nor libpq-fe.h is included here.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

struct sqlite3_stmt;

namespace kiln {

class Connection;
class PgStatement;

using SqlValue = std::variant<int64_t, double, std::string>;

// SQL text with `?` placeholders and the values bound to them, in order.
struct SqlFragment {
  std::string sql;
  std::vector<SqlValue> params;
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
// read; on PostgreSQL: BEGIN ISOLATION LEVEL READ COMMITTED and the store's advisory write lock,
// so writers take turns there too, and each migration is applied once however many processes
// start together); ROLLBACK when destroyed without commit(), as when an exception passes through.
// The isolation is stated, not left to the server's default: under 'repeatable read' the
// snapshot is taken by the lock's own statement, so a writer that waited read what the one
// before it had not committed yet, and a sweep worker's claim hit a key conflict and died.
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
