#include "core/store/sqlite.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

namespace kiln {

namespace {

// Why this process may not write the store at `path`, or "" when it may. access() asks the
// kernel, so a read-only mount or an immutable file counts even for root.
std::string write_refusal(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) {
    return fmt::format("the file is not writable ({})", std::strerror(errno));
  }
  const std::string dir = std::filesystem::absolute(path, ec).parent_path().string();
  if (::access(dir.c_str(), W_OK) != 0) {
    return fmt::format("its folder '{}' is not writable ({})", dir, std::strerror(errno));
  }
  return "";
}

SqliteError read_only_store(const std::string& path, const std::string& why) {
  return SqliteError(
      fmt::format("run store '{}' is read-only: {}, and this command writes to it: make the "
                  "file and its folder writable, or use a writable copy of it",
                  path, why),
      why);
}

// A cleanly closed WAL store (no -shm file) in a folder this process may not write: SQLite cannot
// make the shared index it reads through, so the first read fails.
bool lacks_shared_index(sqlite3* db) {
  if (sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) ==
      SQLITE_OK) {
    return false;
  }
  // SQLITE_READONLY_DIRECTORY or _CANTINIT: a read that would have to write the index first.
  return sqlite3_errcode(db) == SQLITE_READONLY || sqlite3_errcode(db) == SQLITE_CANTOPEN;
}

// `path` as an SQLite URI that reads it as immutable: no shared index, no lock. Safe where
// lacks_shared_index() holds, because a writer would need that index too.
std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (const unsigned char c : path) {
    uri += std::isalnum(c) || std::strchr("/._-", c) ? std::string(1, static_cast<char>(c))
                                                     : fmt::format("%{:02X}", c);
  }
  return uri + "?immutable=1";
}

}  // namespace

Connection::Connection(std::string path, OpenMode mode, const std::string& open_hint)
    : path_(std::move(path)) {
  if (mode != OpenMode::kReadOnly) {
    const std::string refusal = write_refusal(path_);
    if (!refusal.empty()) throw read_only_store(path_, refusal);
  }
  const int flags = SQLITE_OPEN_FULLMUTEX |
                    (mode == OpenMode::kReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
                    (mode == OpenMode::kCreate ? SQLITE_OPEN_CREATE : 0);
  open(path_, flags, open_hint);
  if (mode == OpenMode::kReadOnly && lacks_shared_index(db_)) {
    sqlite3_close(db_);
    open(immutable_uri(path_), flags | SQLITE_OPEN_URI, open_hint);
  }
  // SQLite opens a file it may not write read-only without saying so.
  if (mode != OpenMode::kReadOnly && sqlite3_db_readonly(db_, "main") == 1) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw read_only_store(path_, "SQLite could open it for reading only");
  }
}

void Connection::open(const std::string& name, int flags, const std::string& open_hint) {
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
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
