#include "core/store/db/connection.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "core/store/db/postgres.h"
#include "core/store/db/postgres_dialect.h"
#include "core/util/fs.h"

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
  check_store_url(path_);
  if (is_database_url(path_)) {
    try {
      pg_ = std::make_unique<PgSession>(path_, mode == OpenMode::kReadOnly);
    } catch (const PgError& e) {
      // The caller's hint is about files; a server's is about the URL and credentials.
      throw SqliteError(fmt::format("cannot open run store '{}': {}: check the URL, that the "
                                    "server is up, and the password libpq reads (PGPASSWORD, "
                                    "~/.pgpass)",
                                    path_, e.what()),
                        e.what());
    }
    return;
  }
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
    db_ = nullptr;
    open_unwritable_folder(flags, open_hint);
  }
  // SQLite opens a file it may not write read-only without saying so.
  if (mode != OpenMode::kReadOnly && sqlite3_db_readonly(db_, "main") == 1) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw read_only_store(path_, "SQLite could open it for reading only");
  }
}

// SQLite reads a WAL store through its index (-shm), which it cannot make here; an immutable
// read skips the -wal with it, and so the commits still in it. So a non-empty -wal is
// read from a private copy of the two; without room for one, immutable, with a warning.
void Connection::open_unwritable_folder(int flags, const std::string& open_hint) {
  std::error_code ec;
  const std::string wal = path_ + "-wal";
  if (std::filesystem::file_size(wal, ec) > 0 && !ec) {
    try {
      auto copy = std::make_unique<ScratchDir>();
      const std::string store = *copy / "store.db";
      std::filesystem::copy_file(path_, store);
      std::filesystem::copy_file(wal, store + "-wal");
      private_copy_ = std::move(copy);
      open(store, flags, open_hint);
      return;
    } catch (const std::exception& e) {
      private_copy_.reset();
      std::cerr << fmt::format(
          "kiln: warning: run store '{}' lies in a folder this process cannot write, and its "
          "write-ahead log '{}' could not be copied to be read ({}): the rows its last writer "
          "committed since the last checkpoint may be missing\n",
          path_, wal, e.what());
    }
  }
  open(immutable_uri(path_), flags | SQLITE_OPEN_URI, open_hint);
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
  // PostgreSQL waits for a lock as long as it takes.
  if (db_) sqlite3_busy_timeout(db_, static_cast<int>(wait.count()));
}

void Connection::prepare_writer() {
  if (pg_) return;
  // Writers from other processes (sweeps) wait their turn instead of failing.
  constexpr std::chrono::seconds kWait{30};
  set_busy_timeout(kWait);
  // Processes opening a new store at once race to switch it to WAL, which needs the file alone;
  // the loser can get SQLITE_BUSY regardless (e2e RunIdentity saw it): it tries again, as long.
  for (const auto end = std::chrono::steady_clock::now() + kWait;
       sqlite3_exec(db_, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr) == SQLITE_BUSY &&
       std::chrono::steady_clock::now() < end;)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  exec("PRAGMA journal_mode = WAL");  // done already, or the last try's error
  // NORMAL in WAL mode: a power loss may drop the last commits, never corrupt the file.
  exec("PRAGMA synchronous = NORMAL");
  exec("PRAGMA foreign_keys = ON");
}

int64_t Connection::schema_version() {
  if (pg_) {
    try {
      if (!pg_->has_table("kiln_schema")) return 0;
    } catch (const PgError& e) {
      fail(e.what());
    }
  }
  Statement version(*this, pg_ ? "SELECT max(version) FROM kiln_schema" : "PRAGMA user_version");
  version.step();
  return version.integer(0);
}

void Connection::set_schema_version(int64_t version) {
  if (!pg_) return exec(fmt::format("PRAGMA user_version = {}", version));
  exec(fmt::format(
      "CREATE TABLE IF NOT EXISTS kiln_schema (version BIGINT NOT NULL); DELETE FROM kiln_schema; "
      "INSERT INTO kiln_schema (version) VALUES ({})",
      version));
}

void Connection::apply_migration(const std::string& sqlite_sql) {
  exec(pg_ ? postgres_migration(sqlite_sql) : sqlite_sql);
}

void Connection::rollback_quietly() noexcept {
  // A failed ROLLBACK leaves nothing to do: the database rolls an open transaction back when the
  // connection closes.
  if (pg_) return pg_->exec_quietly("ROLLBACK");
  sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

bool Connection::lost() const {
  return pg_ && pg_->lost();
}

void Connection::reconnect() {
  if (!pg_) return;
  try {
    pg_->reconnect();
  } catch (const PgError& e) {
    fail(e.what());
  }
}

void Connection::exec(const std::string& sql) {
  if (pg_) {
    try {
      return pg_->exec(sql);
    } catch (const PgError& e) {
      fail(e.what());
    }
  }
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string why = message ? message : sqlite3_errmsg(db_);
    sqlite3_free(message);
    throw failure(why);
  }
}

void Connection::fail() const {
  throw failure(sqlite3_errmsg(db_));
}

void Connection::fail(const std::string& why) const {
  throw failure(why);
}

SqliteError Connection::failure(const std::string& why) const {
  return SqliteError(fmt::format("run store '{}': {}{}", path_, why,
                                 failure_hint_.empty() ? "" : ": " + failure_hint_),
                     why);
}

}  // namespace kiln
