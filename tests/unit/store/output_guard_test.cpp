// refuse_output_over_store (core/store/runs/output_guard.h): an output that is the run store, or
// one of SQLite's files beside it, by whatever path, is refused; any other file is not.
#include "core/store/runs/output_guard.h"

#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/util/error.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::string& output, const std::string& db) {
  try {
    refuse_output_over_store(output, db);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(OutputGuard, TheStoreByAnyPathIsRefused) {
  testing::TempDir dir;
  const std::string db = dir / "s.db";
  testing::write_text(db, "a store");
  EXPECT_EQ(error_of(db, db), "-o " + db + ": that is the run store '" + db +
                                  "': writing it would destroy the store's runs; choose another "
                                  "output file");
  fs::create_directories(dir / "sub");
  EXPECT_NE(error_of(dir / "sub/../s.db", db), "");
  fs::create_symlink(db, dir / "link.csv");
  EXPECT_NE(error_of(dir / "link.csv", db), "");
  fs::create_hard_link(db, dir / "hard.csv");
  EXPECT_NE(error_of(dir / "hard.csv", db), "");
  fs::create_directory_symlink(dir.str(), dir / "dirlink");
  EXPECT_NE(error_of(dir / "dirlink/s.db", db), "");
  testing::InDirectory here(dir.str());
  EXPECT_NE(error_of("./s.db", db), "");
  EXPECT_NE(error_of("s.db", "./sub/../s.db"), "");
}

TEST(OutputGuard, SQLitesFilesBesideTheStoreAreRefusedWhetherTheyExistOrNot) {
  testing::TempDir dir;
  const std::string db = dir / "s.db";
  testing::write_text(db, "a store");
  testing::write_text(db + "-wal", "a log");
  EXPECT_NE(
      error_of(db + "-wal", db)
          .find("that is '" + db + "-wal', the write-ahead log of the run store '" + db + "'"),
      std::string::npos);
  EXPECT_NE(error_of(db + "-shm", db).find("the shared-memory index"), std::string::npos);
  EXPECT_NE(error_of(db + "-journal", db).find("the rollback journal"), std::string::npos);
  fs::create_directory_symlink(dir.str(), dir / "dirlink");
  EXPECT_NE(error_of(dir / "dirlink/s.db-shm", db), "");
}

// A store reached through a symlink keeps its -wal beside the file the link leads to, which is
// where SQLite writes it (`--db link.db -o main.db-wal` must not overwrite a live run's log).
// Checked with SQLite itself: the -wal it makes for a store opened through the link.
TEST(OutputGuard, TheSideFilesOfAStoreReachedThroughASymlinkAreRefused) {
  testing::TempDir dir;
  fs::create_directories(dir / "real");
  const std::string main_db = dir / "real/main.db", link = dir / "link.db";
  fs::create_symlink(main_db, link);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(link.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "PRAGMA journal_mode = WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1)",
                   nullptr, nullptr, nullptr),
      SQLITE_OK);
  ASSERT_TRUE(fs::exists(main_db + "-wal"));  // beside the real file, as SQLite keeps it
  ASSERT_FALSE(fs::exists(link + "-wal"));
  EXPECT_NE(error_of(main_db + "-wal", link).find("the write-ahead log"), std::string::npos);
  EXPECT_NE(error_of(dir / "real/../real/main.db-shm", link), "");
  sqlite3_close(db);
  // Once closed the log is gone, and the name still is refused.
  EXPECT_NE(error_of(main_db + "-wal", link), "");
  EXPECT_NE(error_of(main_db + "-journal", link), "");
}

TEST(OutputGuard, OtherFilesAndStdoutPass) {
  testing::TempDir dir;
  const std::string db = dir / "s.db";
  testing::write_text(db, "a store");
  EXPECT_EQ(error_of(dir / "s.csv", db), "");
  EXPECT_EQ(error_of(dir / "s.db-wal.csv", db), "");
  EXPECT_EQ(error_of(dir / "s.db.tmp", db), "");    // atomic writes never write into an old file
  EXPECT_EQ(error_of("", db), "");                  // stdout
  testing::write_text(dir / "copy.db", "a store");  // equal bytes, another file
  EXPECT_EQ(error_of(dir / "copy.db", db), "");
}

}  // namespace
}  // namespace kiln
