// Run stores this kiln may only read, through the real binary: one whose schema is newer than
// this kiln's, and one that is a read-only file in a read-only folder. Commands that only read
// go on (the first with one warning line); commands that write refuse with one line, exit 2, and
// change nothing.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tiny_run.h"

namespace kiln {
namespace {

using testing::CommandResult;
using testing::expect_one_error_line;
using testing::run_kiln;
using testing::scalar;
namespace fs = std::filesystem;

class StoreAccess : public testing::TinyRun {
 protected:
  // Runs a and b, two steps each with a snapshot at the end; then the store is closed.
  void two_runs() {
    for (const char* name : {"a", "b"}) {
      auto run = run_kiln("run " + experiment() + " --name " + name +
                          " --set train.steps=2 --set checkpoint.every=2 --set eval.every=0");
      ASSERT_EQ(run.exit_code, 0) << run.output;
    }
  }

  // Commands that only read the store, each of which names run a in its output.
  std::vector<std::string> readers(const std::string& out) {
    const std::string db_arg = " --db " + db();
    return {"runs list" + db_arg,
            "runs show a" + db_arg,
            "runs compare a b" + db_arg,
            "runs export a" + db_arg,
            "runs plot a b -o " + out + "/curves.svg" + db_arg,
            "report a b -o " + out + "/report.html" + db_arg,
            "sample a --tokens 4" + db_arg,
            "export a -o " + out + "/a.safetensors" + db_arg};
  }

  // Commands that write to it.
  std::vector<std::string> writers() {
    const std::string exp = experiment();
    return {"run " + exp + " --name c --set train.steps=1",
            "resume a --set train.steps=4 --db " + db(),
            "sweep " + exp + " --name s --grid run.seed=1,2 --set train.steps=1",
            "runs rm a --yes --db " + db(), "eval a --db " + db()};
  }

  // The store and run a's folder are as two_runs() left them.
  void expect_unchanged() {
    EXPECT_EQ(scalar(db(), "select group_concat(name || ':' || status) from runs"),
              "a:completed,b:completed");
    EXPECT_EQ(scalar(db(), "select count(*) from metrics"), "4");
    EXPECT_EQ(scalar(db(), "select count(*) from evals"), "0");
    bool snapshot = false;  // in run a's folder, <name>@<id>
    for (const auto& entry : fs::directory_iterator(dir_ / "runs")) {
      snapshot = snapshot || (entry.path().filename().string().rfind("a@", 0) == 0 &&
                              fs::is_directory(entry.path() / "snapshots/step_000002"));
    }
    EXPECT_TRUE(snapshot);
  }
};

size_t count_of(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++count;
  return count;
}

void set_user_version(const std::string& db, int version) {
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  const std::string sql = "PRAGMA user_version = " + std::to_string(version);
  EXPECT_EQ(sqlite3_exec(handle, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(handle);
}

TEST_F(StoreAccess, ANewerSchemaIsReadWithOneWarningAndRefusedByEveryCommandThatWrites) {
  two_runs();
  set_user_version(db(), 99);
  const std::string newer = "has a newer schema (version 99) than this kiln understands";
  for (const auto& args : readers(dir_.str())) {
    auto result = run_kiln(args);
    EXPECT_EQ(result.exit_code, 0) << args << "\n" << result.output;
    EXPECT_EQ(count_of(result.output, "kiln: warning: "), 1u) << args << "\n" << result.output;
    EXPECT_NE(result.output.find("kiln: warning: run store '" + db() + "' " + newer),
              std::string::npos)
        << args << "\n"
        << result.output;
    EXPECT_EQ(result.output.find("error"), std::string::npos) << args << "\n" << result.output;
  }
  for (const auto& args : writers())
    expect_one_error_line(run_kiln(args), args, newer);
  expect_unchanged();
  EXPECT_EQ(scalar(db(), "pragma user_version"), "99");
}

// The prefix that runs a command as a user who may not write what root made: setpriv to
// nobody when the tests run as root (root writes read-only files), nothing otherwise.
std::string as_unprivileged() {
  if (::geteuid() != 0) return "";
  return "setpriv --reuid=65534 --regid=65534 --clear-groups ";
}

// Why user nobody cannot run this test's kiln on files in `dir` ("" when it can): setpriv
// refused, or the binary or the scratch folder lies under a folder only root may enter (a
// checkout or TMPDIR under /root).
std::string unprivileged_cannot_run(const std::string& user, const std::string& dir) {
  if (user.empty()) return "";
  if (std::system((user + "true").c_str()) != 0) {
    return "running as root, and setpriv cannot drop to user nobody: nothing would be read-only "
           "to this test";
  }
  // The scratch folder itself the test opens to others (ReadOnly); the folders above it must be.
  const std::string above = fs::path(dir).parent_path().string();
  const std::string reach =
      user + "sh -c \"test -x '" + KILN_BINARY + "' && test -x '" + above + "'\" 2>/dev/null";
  if (std::system(reach.c_str()) != 0) {
    return fmt::format("user nobody cannot reach {} or {} (a folder above is closed to others)",
                       KILN_BINARY, above);
  }
  return "";
}

// `kiln ARGS` as run_kiln runs it, behind `prefix`.
CommandResult run_kiln_as(const std::string& prefix, const std::string& args) {
  CommandResult result;
  const std::string command = prefix + "'" + KILN_BINARY + "' " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;)
    result.output.append(buf, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// Makes a file or folder read-only for everyone; gives the owner all rights back when destroyed,
// so that the fixture can delete it whatever the test did.
class ReadOnly {
 public:
  explicit ReadOnly(std::string path) : path_(std::move(path)) {
    const bool dir = fs::is_directory(path_);
    fs::permissions(
        path_, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read |
                   (dir ? fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec
                        : fs::perms::none));
  }
  ~ReadOnly() { fs::permissions(path_, fs::perms::owner_all); }
  ReadOnly(const ReadOnly&) = delete;
  ReadOnly& operator=(const ReadOnly&) = delete;

 private:
  std::string path_;
};

TEST_F(StoreAccess, AReadOnlyStoreIsReadAndEveryCommandThatWritesSaysItIsReadOnly) {
  const std::string user = as_unprivileged();
  if (const std::string why = unprivileged_cannot_run(user, dir_.str()); !why.empty()) {
    GTEST_SKIP() << "SKIP: " << why;
  }
  two_runs();
  // Closed cleanly: no -wal or -shm file, which a reader in a read-only folder cannot create.
  ASSERT_FALSE(fs::exists(db() + "-shm"));
  testing::TempDir out;  // where the readers write their plots and reports
  fs::permissions(out.str(), fs::perms::all);
  const std::vector<std::string> writing = writers();  // writes the experiment file
  {
    const ReadOnly file(db()), folder(dir_.str());  // the folder holds the runs' folders too
    for (const auto& args : readers(out.str())) {
      auto result = run_kiln_as(user, args);
      EXPECT_EQ(result.exit_code, 0) << args << "\n" << result.output;
      // No error and no warning (sample and export name the snapshot they read, as always).
      EXPECT_EQ(result.output.find("kiln: error"), std::string::npos) << args << "\n"
                                                                      << result.output;
      EXPECT_EQ(result.output.find("kiln: warning"), std::string::npos) << args << "\n"
                                                                        << result.output;
    }
    EXPECT_NE(testing::read_file(out / "report.html").find("<svg"), std::string::npos);
    for (const auto& args : writing) {
      expect_one_error_line(run_kiln_as(user, args), args,
                            "run store '" + db() + "' is read-only: ");
    }
  }
  expect_unchanged();
}

// A store in a folder this user may not enter is not "no run store": the error says it cannot be
// read and why, for every command that opens one.
TEST_F(StoreAccess, AStoreBehindAFolderThisUserMayNotEnterIsAPermissionError) {
  const std::string user = as_unprivileged();
  if (const std::string why = unprivileged_cannot_run(user, dir_.str()); !why.empty()) {
    GTEST_SKIP() << "SKIP: " << why;
  }
  two_runs();
  fs::create_directories(dir_ / "locked");
  fs::copy_file(db(), dir_ / "locked/kiln.db");
  fs::permissions(dir_ / "locked", fs::perms::owner_all);  // rwx------, root's
  const std::string locked = dir_ / "locked/kiln.db";
  for (const std::string& args :
       {"runs list --db " + locked, "eval a --db " + locked, "resume a --db " + locked}) {
    expect_one_error_line(run_kiln_as(user, args), args,
                          "cannot read '" + locked + "': Permission denied");
  }
}

// A copy of a store taken while a writer held it open: its last commits are still in the -wal
// file beside it. Read in a folder the reader cannot write (where SQLite cannot make its shared
// index), every committed run must be seen, as the sqlite3 shell sees them in a writable copy
// (an immutable read would skip the WAL and list 1 run of 2).
TEST_F(StoreAccess, AReadOnlyCopyWithItsWalShowsEveryCommittedRow) {
  const std::string user = as_unprivileged();
  if (const std::string why = unprivileged_cannot_run(user, dir_.str()); !why.empty()) {
    GTEST_SKIP() << "SKIP: " << why;
  }
  if (std::system("command -v sqlite3 >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "SKIP: the sqlite3 shell (Debian's sqlite3) is not installed";
  }
  two_runs();
  // A reader kept open while run c commits, with checkpoints off: c's rows stay in the WAL,
  // and the store is not checkpointed when c's kiln closes it.
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(db().c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "PRAGMA wal_autocheckpoint = 0; SELECT count(*) FROM runs",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  auto c = run_kiln("run " + experiment() + " --name c --set train.steps=2 --set eval.every=0");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  ASSERT_GT(fs::file_size(db() + "-wal"), 0u) << "run c's commits were checkpointed already";
  testing::TempDir copies;
  const std::string locked = copies / "locked", open_copy = copies / "open";
  for (const std::string& folder : {locked, open_copy}) {
    fs::create_directories(folder);
    fs::copy_file(db(), folder + "/kiln.db");
    fs::copy_file(db() + "-wal", folder + "/kiln.db-wal");
  }
  sqlite3_close(holder);
  std::string shell;
  if (FILE* pipe = ::popen(
          ("sqlite3 '" + open_copy + "/kiln.db' 'SELECT count(*) FROM runs' 2>&1").c_str(), "r")) {
    char buffer[256];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
      shell.append(buffer, n);
    ::pclose(pipe);
  }
  ASSERT_EQ(shell, "3\n");  // a, b and c, as SQLite's own shell reads the copy
  fs::permissions(copies.str(), fs::perms::all);
  {
    const ReadOnly file(locked + "/kiln.db"), wal(locked + "/kiln.db-wal"), folder(locked);
    auto listed = run_kiln_as(user, "runs list --format csv --db " + locked + "/kiln.db");
    EXPECT_EQ(listed.exit_code, 0) << listed.output;
    for (const char* name : {",a,", ",b,", ",c,"})
      EXPECT_NE(listed.output.find(name), std::string::npos) << name << "\n" << listed.output;
    EXPECT_EQ(listed.output.find("warning"), std::string::npos) << listed.output;
  }
  EXPECT_FALSE(fs::exists(locked + "/kiln.db-shm"));  // nothing written beside the copy
}

}  // namespace
}  // namespace kiln
