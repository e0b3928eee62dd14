// The translation of Kiln's SQL into PostgreSQL's dialect (core/store/db/postgres_dialect.h),
// without a server: globs against SQLite's own GLOB, placeholders and upserts against the text
// PostgreSQL's manual gives for them, and the URL checks.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <regex>

#include "core/store/db/connection.h"
#include "core/store/db/postgres_dialect.h"
#include "test_util.h"

namespace kiln {
namespace {

bool sqlite_glob(const std::string& pattern, const std::string& text) {
  sqlite3* db = nullptr;
  sqlite3_open(":memory:", &db);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "SELECT ? GLOB ?", -1, &stmt, nullptr);
  sqlite3_bind_text(stmt, 1, text.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt, 2, pattern.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_step(stmt);
  const bool match = sqlite3_column_int(stmt, 0) == 1;
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return match;
}

TEST(PostgresDialect, GlobsMatchWhatSqliteGlobMatches) {
  const std::vector<std::string> patterns = {"a*",      "*b",   "a?c",  "[ab]x", "[^ab]x",
                                             "[a-c]*",  "a.b",  "a+b",  "(x)",   "sweep1/*",
                                             "lr=1e-3", "a\\b", "[]]x", "$^|{}", "*"};
  const std::vector<std::string> texts = {"a",     "ab",  "abc",       "axc",     "bx",   "cx",
                                          "a.b",   "axb", "a+b",       "(x)",     "x",    "]x",
                                          "$^|{}", "",    "sweep1/lr", "lr=1e-3", "a\\b", "b"};
  for (const auto& pattern : patterns) {
    const std::regex re(glob_to_regex(pattern), std::regex::extended);
    for (const auto& text : texts) {
      EXPECT_EQ(std::regex_search(text, re), sqlite_glob(pattern, text))
          << "'" << text << "' GLOB '" << pattern << "' as " << glob_to_regex(pattern);
    }
  }
}

TEST(PostgresDialect, PlaceholdersBecomeNumberedOutsideQuotes) {
  std::vector<bool> globs;
  const PrimaryKeyOf no_key = [](const std::string&) { return std::vector<std::string>{}; };
  EXPECT_EQ(postgres_sql("SELECT a FROM t WHERE b = ? AND c = '?' AND d = ?", no_key, globs),
            "SELECT a FROM t WHERE b = $1 AND c = '?' AND d = $2");
  EXPECT_EQ(globs, (std::vector<bool>{false, false}));
  EXPECT_EQ(postgres_sql("SELECT 1 WHERE x = ?1 OR name GLOB ? OR n NOT GLOB ?", no_key, globs),
            "SELECT 1 WHERE x = $1 OR name ~ $1 OR n !~ $2");
  EXPECT_EQ(globs, (std::vector<bool>{true, true}));
}

TEST(PostgresDialect, InsertOrReplaceIsAnUpsertOnThePrimaryKey) {
  std::vector<bool> globs;
  const PrimaryKeyOf key = [](const std::string& table) {
    EXPECT_EQ(table, "snapshots");
    return std::vector<std::string>{"run_id", "label"};
  };
  EXPECT_EQ(postgres_sql("INSERT OR REPLACE INTO snapshots (run_id, label, step, path) VALUES "
                         "(?, ?, ?, ?)",
                         key, globs),
            "INSERT INTO snapshots (run_id, label, step, path) VALUES ($1, $2, $3, $4) ON "
            "CONFLICT (run_id, label) DO UPDATE SET step = EXCLUDED.step, path = EXCLUDED.path");
  EXPECT_EQ(postgres_sql("INSERT OR IGNORE INTO h (a, b) VALUES (?, ?)", key, globs),
            "INSERT INTO h (a, b) VALUES ($1, $2) ON CONFLICT DO NOTHING");
}

TEST(PostgresDialect, MigrationsGetPostgresTypes) {
  EXPECT_EQ(postgres_migration("CREATE TABLE t (a INTEGER NOT NULL, b REAL) WITHOUT ROWID;"),
            "CREATE TABLE t (a BIGINT NOT NULL, b DOUBLE PRECISION) ;");
}

TEST(PostgresDialect, APasswordInTheUrlIsRefusedAndNeverEchoed) {
  EXPECT_EQ(masked_url("postgresql://kiln:hunter2@db:5432/runs"),
            "postgresql://kiln:***@db:5432/runs");
  EXPECT_EQ(masked_url("postgresql://kiln@db/runs"), "postgresql://kiln@db/runs");
  for (const char* url : {"postgresql://kiln:hunter2@db/runs",
                          "postgresql://kiln@db/runs?sslmode=require&password=hunter2"}) {
    const std::string error = testing::user_error_of([&] { refuse_password_in_url(url); });
    EXPECT_NE(error.find("carries a password"), std::string::npos) << error;
    EXPECT_EQ(error.find("hunter2"), std::string::npos) << error;
  }
  EXPECT_NO_THROW(refuse_password_in_url("postgresql://kiln@db:5432/runs?sslmode=require"));
}

// libpq's key/value form names a PostgreSQL store too (not a SQLite file of that name, with
// its password printed in the run's header).
TEST(PostgresDialect, AKeyValueConnectionStringIsAStoreAndItsPasswordIsRefused) {
  for (const char* text : {"host=db1 dbname=runs user=kiln", "  dbname = runs", "service=kiln",
                           "sslmode=require host=db1"}) {
    EXPECT_TRUE(is_connection_string(text)) << text;
    EXPECT_TRUE(is_database_url(text)) << text;
    EXPECT_NO_THROW(refuse_password_in_url(text)) << text;
  }
  for (const char* path : {"runs/kiln.db", "my=runs.db", "hostname=x.db", "/tmp/a b.db", ""}) {
    EXPECT_FALSE(is_connection_string(path)) << path;
    EXPECT_FALSE(is_database_url(path)) << path;
  }
  EXPECT_EQ(masked_url("host=db1 password=hunter2 dbname=runs"),
            "host=db1 password=*** dbname=runs");
  EXPECT_EQ(masked_url("host=db1 password = 'hun ter\\'2' dbname=runs"),
            "host=db1 password = *** dbname=runs");
  for (const char* text :
       {"host=db1 password=hunter2 dbname=runs", "dbname=runs password='hunter2'",
        "user=kiln sslpassword=x password=hunter2"}) {
    const std::string error = testing::user_error_of([&] { refuse_password_in_url(text); });
    EXPECT_NE(error.find("carries a password"), std::string::npos) << error;
    EXPECT_EQ(error.find("hunter2"), std::string::npos) << error;
    const std::string stored = testing::user_error_of([&] { store_location(text); });
    EXPECT_NE(stored.find("carries a password"), std::string::npos) << stored;
    EXPECT_EQ(stored.find("hunter2"), std::string::npos) << stored;
  }
  // sslpassword (a client key's passphrase) is not the connection's password.
  EXPECT_NO_THROW(refuse_password_in_url("host=db1 sslpassword=x"));
}

}  // namespace
}  // namespace kiln
