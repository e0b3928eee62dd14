#include "core/store/sqlite.h"

#include <sqlite3.h>

#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace kiln {

Connection::Connection(std::string path, OpenMode mode, const std::string& open_hint)
    : path_(std::move(path)) {
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX |
                    (mode == OpenMode::kCreate ? SQLITE_OPEN_CREATE : 0);
  const int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw SqliteError(fmt::format("cannot open run store '{}': {}: {}", path_, why, open_hint),
                      why);
  }
}

Connection::~Connection() {
  sqlite3_close(db_);
}

void Connection::set_busy_timeout(std::chrono::milliseconds wait) {
  sqlite3_busy_timeout(db_, static_cast<int>(wait.count()));
}

void Connection::exec(const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string why = message ? message : sqlite3_errmsg(db_);
    sqlite3_free(message);
    throw failure(why);
  }
}

int64_t Connection::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}

void Connection::fail() const {
  throw failure(sqlite3_errmsg(db_));
}

SqliteError Connection::failure(const std::string& why) const {
  return SqliteError(fmt::format("run store '{}': {}{}", path_, why,
                                 failure_hint_.empty() ? "" : ": " + failure_hint_),
                     why);
}

Statement::Statement(Connection& db, const std::string& sql, const std::vector<SqlValue>& params)
    : db_(db) {
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) db.fail();
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

Statement& Statement::bind(int index, int64_t value) {
  return check(sqlite3_bind_int64(stmt_, index, value));
}

Statement& Statement::bind(int index, double value) {
  return check(sqlite3_bind_double(stmt_, index, value));
}

Statement& Statement::bind(int index, std::optional<double> value) {
  return value ? bind(index, *value) : bind_null(index);
}

Statement& Statement::bind(int index, const std::string& value) {
  return check(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                                 SQLITE_TRANSIENT));
}

Statement& Statement::bind(int index, const SqlValue& value) {
  return std::visit([&](const auto& v) -> Statement& { return bind(index, v); }, value);
}

Statement& Statement::bind_null(int index) {
  return check(sqlite3_bind_null(stmt_, index));
}

Statement& Statement::bind_text_or_null(int index, const std::string& value) {
  return value.empty() ? bind_null(index) : bind(index, value);
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) db_.fail();
  return false;
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::integer(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

double Statement::real(int column) const {
  return is_null(column) ? NAN : sqlite3_column_double(stmt_, column);
}

std::optional<double> Statement::maybe_real(int column) const {
  if (is_null(column)) return std::nullopt;
  return sqlite3_column_double(stmt_, column);
}

std::optional<int64_t> Statement::maybe_integer(int column) const {
  if (is_null(column)) return std::nullopt;
  return sqlite3_column_int64(stmt_, column);
}

std::string Statement::text(int column) const {
  const auto* p = sqlite3_column_text(stmt_, column);
  return p ? reinterpret_cast<const char*>(p) : "";
}

Transaction::Transaction(Connection& db) : db_(db) {
  db_.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  // Not through exec(): a destructor must not throw, and a failed ROLLBACK leaves nothing to do
  // (SQLite rolls an open transaction back when the connection closes).
  if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace kiln
