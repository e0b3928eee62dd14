// Statement and Transaction (core/store/db/statement.h): SQLite's prepared statements, or
// PostgreSQL's through core/store/db/postgres.h, and the write lock each transaction takes.
#include "core/store/db/statement.h"

#include <sqlite3.h>

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/store/db/connection.h"
#include "core/store/db/postgres.h"

namespace kiln {

namespace {

// The key of the advisory lock a PostgreSQL store's writers take in turn ('kiln').
constexpr int64_t kPostgresWriteLock = 0x6b696c6e;

}  // namespace

Statement::Statement(Connection& db, const std::string& sql, const std::vector<SqlValue>& params)
    : db_(db) {
  if (PgSession* session = db.postgres()) {
    try {
      pg_ = std::make_unique<PgStatement>(*session, sql);
    } catch (const PgError& e) {
      db.fail(e.what());
    }
  } else if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
    db.fail();
  }
  for (size_t i = 0; i < params.size(); ++i)
    bind(static_cast<int>(i) + 1, params[i]);
}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

Statement& Statement::check(int rc) {
  if (rc != SQLITE_OK) db_.fail();
  return *this;
}

Statement& Statement::bind(int index, std::optional<double> value) {
  return value ? bind(index, *value) : bind_null(index);
}

Statement& Statement::bind(int index, const SqlValue& value) {
  if (pg_) {
    pg_->bind(index, value);
    return *this;
  }
  if (const auto* integer = std::get_if<int64_t>(&value))
    return check(sqlite3_bind_int64(stmt_, index, *integer));
  if (const auto* real = std::get_if<double>(&value))
    return check(sqlite3_bind_double(stmt_, index, *real));
  const auto& text = std::get<std::string>(value);
  return check(sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()),
                                 SQLITE_TRANSIENT));
}

Statement& Statement::bind_null(int index) {
  if (pg_) {
    pg_->bind_null(index);
    return *this;
  }
  return check(sqlite3_bind_null(stmt_, index));
}

Statement& Statement::bind_text_or_null(int index, const std::string& value) {
  return value.empty() ? bind_null(index) : bind(index, value);
}

bool Statement::step() {
  if (pg_) {
    try {
      return pg_->step();
    } catch (const PgError& e) {
      db_.fail(e.what());
    }
  }
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) db_.fail();
  return false;
}

void Statement::reset() {
  if (pg_) return pg_->reset();
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int column) const {
  if (pg_) return pg_->is_null(column);
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::integer(int column) const {
  if (pg_) return pg_->integer(column);
  return sqlite3_column_int64(stmt_, column);
}

double Statement::real(int column) const {
  if (is_null(column)) return NAN;
  return pg_ ? pg_->real(column) : sqlite3_column_double(stmt_, column);
}

std::optional<double> Statement::maybe_real(int column) const {
  if (is_null(column)) return std::nullopt;
  return real(column);
}

std::optional<int64_t> Statement::maybe_integer(int column) const {
  if (is_null(column)) return std::nullopt;
  return integer(column);
}

std::string Statement::text(int column) const {
  if (pg_) return pg_->text(column);
  const auto* p = sqlite3_column_text(stmt_, column);
  return p ? reinterpret_cast<const char*>(p) : "";
}

Transaction::Transaction(Connection& db) : db_(db) {
  db_.exec(
      db_.dialect() == SqlDialect::kSqlite
          ? std::string("BEGIN IMMEDIATE")
          : fmt::format("BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock({})",
                        kPostgresWriteLock));
}

Transaction::~Transaction() {
  // Not through exec(): a destructor must not throw.
  if (!done_) db_.rollback_quietly();
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace kiln
