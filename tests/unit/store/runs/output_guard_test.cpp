// refuse_output_over_store (core/store/runs/output_guard.h): an output that is the run store, or
// one of SQLite's files beside it, by whatever path, is refused; any other file is not. And
// check_output_path's rules for any SQLite database (by SQLite's own files) and for what the
// command reads.
#include "core/store/runs/output_guard.h"

#include <gtest/gtest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

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

// check_output_path with what the command reads: the error, or "" when it passes.
std::string check_error(const std::string& output, const std::vector<CommandInput>& reads = {},
                        OutputKind kind = OutputKind::kFile) {
  try {
    check_output_path(output, "", "--details", kind, reads);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// A database SQLite itself made, under a name that says nothing of it.
void make_database(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t (x)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

TEST(OutputGuard, AnySQLiteDatabaseIsRefusedByItsHeaderNotItsName) {
  testing::TempDir dir;
  make_database(dir / "notes.jsonl");
  EXPECT_EQ(check_error(dir / "notes.jsonl"),
            "--details " + (dir / "notes.jsonl") +
                ": that is a SQLite database (another run store?): writing it would destroy it; "
                "choose another output file");
  const std::string log = check_error(dir / "notes.jsonl-wal");
  EXPECT_NE(log.find("the write-ahead log of the SQLite database '" + (dir / "notes.jsonl") + "'"),
            std::string::npos)
      << log;
  EXPECT_NE(check_error(dir / "notes.jsonl-journal"), "");
  fs::create_symlink(dir / "notes.jsonl", dir / "link.npy");
  EXPECT_NE(check_error(dir / "link.npy"), "");
  // 15 bytes of the header, a text that names SQLite, a .db that is not one: written as any file.
  testing::write_text(dir / "short.db", std::string("SQLite format 3", 15));
  testing::write_text(dir / "text.db", "SQLite format 3 is the header\n");
  testing::write_text(dir / "plain.db", "");
  for (const char* name : {"short.db", "text.db", "plain.db", "plain.db-wal", "new.db"})
    EXPECT_EQ(check_error(dir / name), "") << name;
}

TEST(OutputGuard, WhatTheCommandReadsIsRefusedByAnyPath) {
  testing::TempDir dir;
  testing::write_text(dir / "items.jsonl", "{}\n");
  const std::vector<CommandInput> reads = {{dir / "items.jsonl", "the items file of task 'mc'"}};
  EXPECT_EQ(check_error(dir / "items.jsonl", reads),
            "--details " + (dir / "items.jsonl") + ": that is the items file of task 'mc' '" +
                (dir / "items.jsonl") +
                "', which this command reads: writing it would destroy it; choose another "
                "output file");
  fs::create_directories(dir / "sub");
  fs::create_symlink(dir / "items.jsonl", dir / "sub/link.jsonl");
  EXPECT_NE(check_error(dir / "sub/link.jsonl", reads), "");
  EXPECT_NE(check_error(dir / "sub/../items.jsonl", reads), "");
  EXPECT_EQ(check_error(dir / "items.jsonl.out", reads), "");
  EXPECT_EQ(check_error(dir / "items.jsonl", {{"", "no file"}}), "");
}

// A Hub cache's snapshot folder links each file to a blob outside it: the blob is refused too.
TEST(OutputGuard, NothingLandsInAFolderTheCommandReadsNorOnAFileItLinksTo) {
  testing::TempDir dir;
  fs::create_directories(dir / "blobs");
  fs::create_directories(dir / "model");
  testing::write_text(dir / "blobs/0a1b", "weights");
  fs::create_symlink(dir / "blobs/0a1b", dir / "model/model.safetensors");
  const std::vector<CommandInput> reads = {{dir / "model", "the --hf model folder"}};
  EXPECT_EQ(check_error(dir / "model/new.jsonl", reads),
            "--details " + (dir / "model/new.jsonl") + ": that is inside '" + (dir / "model") +
                "', the --hf model folder, which this command reads: choose a folder outside it");
  EXPECT_NE(check_error(dir / "model/../model/config.json", reads), "");
  EXPECT_NE(check_error(dir / "model", reads, OutputKind::kFolder), "");
  EXPECT_NE(check_error(dir / "blobs/0a1b", reads).find("a file of the --hf model folder"),
            std::string::npos);
  EXPECT_EQ(check_error(dir / "blobs/other", reads), "");
  EXPECT_EQ(check_error(dir / "model.jsonl", reads), "");
}

TEST(OutputGuard, AnOutputFolderMayNotHoldWhatTheCommandReads) {
  testing::TempDir dir;
  testing::write_text(dir / "corpus/kjv.txt", "text");
  const std::vector<CommandInput> reads = {{dir / "corpus/kjv.txt", "an input text"}};
  EXPECT_EQ(check_error(dir / "corpus", reads, OutputKind::kFolder),
            "--details " + (dir / "corpus") + ": that folder holds an input text '" +
                (dir / "corpus/kjv.txt") +
                "', which this command reads: choose a folder of its own");
  EXPECT_NE(check_error(dir.str(), reads, OutputKind::kFolder), "");
  EXPECT_EQ(check_error(dir / "corpus/out", reads, OutputKind::kFolder), "");
  EXPECT_EQ(check_error(dir / "corpus", reads, OutputKind::kFile), "");  // a file's name only
}

}  // namespace
}  // namespace kiln
