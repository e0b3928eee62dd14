// "No command writes over the store" and "limits instead of crashes", through the
// real binary: an output path that is the run store (or its -wal, by another path) is refused
// and the store keeps its runs; a 50,000-part TOML key, 30,000 parentheses in --where and a
// shard truncated under a running run each end in one error line and exit 2, not a signal; and
// a --where of 1,000 or-ed comparisons returns its runs.
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "core/util/text.h"
#include "fake_runs.h"
#include "tiny_run.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::run_kiln;

// The lines of `text` that start with `prefix`.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

// `kiln ARGS` failed as a user's mistake should (testing::expect_one_error_line).
void expect_one_error_line(const std::string& args, const std::string& expected) {
  testing::expect_one_error_line(run_kiln(args), args, expected);
}

class StoreOutputs : public testing::FakeRuns {
 protected:
  std::string all_runs() {
    auto listed = run_kiln("runs list --format csv --sort name --db " + db_path());
    EXPECT_EQ(listed.exit_code, 0) << listed.output;
    std::vector<std::string> names;
    for (const auto& line : split(listed.output, '\n')) {
      const auto fields = split(line, ',');
      if (fields.size() > 1 && fields[0] != "id") names.push_back(fields[1]);
    }
    return join(names, " ");
  }
};

TEST_F(StoreOutputs, NoCommandWritesOverTheStoreOrItsLogByAnyPath) {
  // A connection held open in WAL mode, with a change the store file itself does not have yet:
  // its -wal file exists and holds data that losing would lose.
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder,
                         "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; "
                         "UPDATE runs SET host = 'held' WHERE name = 'lr1'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  const std::string db = db_path(), wal = db + "-wal";
  ASSERT_TRUE(fs::exists(wal));
  fs::create_directories(dir_ / "sub");
  fs::create_symlink(db, dir_ / "link.csv");
  const std::string store = read_file(db), log = read_file(wal);

  const std::string refused = "that is the run store '" + db + "'";
  const std::string on = " --db " + db;
  expect_one_error_line("runs export lr1 -o " + db + on, refused);
  expect_one_error_line("runs export lr1 --format jsonl -o " + wal + on,
                        "that is '" + wal + "', the write-ahead log of the run store '" + db + "'");
  expect_one_error_line("runs export lr1 -o " + (dir_ / "sub/../kiln.db") + on, refused);
  expect_one_error_line("runs export lr1 -o " + (dir_ / "link.csv") + on, refused);
  {
    testing::InDirectory here(dir_.str());
    expect_one_error_line("runs export lr1 -o ./kiln.db --db kiln.db", "that is the run store");
    expect_one_error_line("runs export lr1 -o kiln.db-wal --db " + db, "the write-ahead log");
  }
  expect_one_error_line("report lr1 -o " + (dir_ / "./kiln.db") + on, refused);
  expect_one_error_line("runs plot lr1 -o " + wal + on, "the write-ahead log of the run store");
  expect_one_error_line("export lr1 -o " + db + on, refused);
  // A store whose name a plot could have: the store, not the .svg check, is what refuses it.
  fs::copy_file(db, dir_ / "store.svg");
  expect_one_error_line(
      "runs plot lr1 -o " + (dir_ / "store.svg") + " --db " + (dir_ / "sub/../store.svg"),
      "that is the run store");

  // A store reached through a symlink keeps its -wal beside the file the link leads to, which
  // `-o` could reach under its own name; and the same files through a bind mount.
  fs::create_symlink(db, dir_ / "link.db");
  expect_one_error_line("runs export lr1 --format jsonl -o " + wal + " --db " + (dir_ / "link.db"),
                        "the write-ahead log of the run store");
  testing::TempDir mounted;
  if (std::system(
          ("mount --bind '" + dir_.str() + "' '" + mounted.str() + "' 2>/dev/null").c_str()) == 0) {
    expect_one_error_line("runs export lr1 --format jsonl -o " + (mounted / "kiln.db-wal") + on,
                          "the write-ahead log of the run store");
    expect_one_error_line("runs export lr1 -o " + db + " --db " + (mounted / "kiln.db"),
                          "that is the run store");
    EXPECT_EQ(std::system(("umount '" + mounted.str() + "'").c_str()), 0) << "umount";
  } else {
    std::printf("bind-mount case not run: this process may not mount (not root, or no mounts)\n");
  }

  EXPECT_EQ(read_file(db), store);
  EXPECT_EQ(read_file(wal), log);
  sqlite3_close(holder);
  EXPECT_EQ(all_runs(), "lr1 lr3 lr3-drift lr3-rerun lr3-short");
  EXPECT_EQ(testing::scalar(db, "select host from runs where name = 'lr1'"), "held");
}

TEST_F(StoreOutputs, OutputsStillReachTheirFilesThroughATemporaryName) {
  const std::string csv = dir_ / "out/lr1.csv", png = dir_ / "out/curves.png";
  const auto exported = run_kiln("runs export lr1 -o " + csv + " --db " + db_path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_EQ(read_file(csv).rfind("run,kind,step,", 0), 0u) << read_file(csv);
  // A PNG needs Debian's rsvg-convert (librsvg2-bin, which tools/setup.sh installs).
  if (std::system("command -v rsvg-convert >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "rsvg-convert is not installed (librsvg2-bin): no PNG to write";
  }
  const auto plotted = run_kiln("runs plot 'lr3*' -o " + png + " --db " + db_path());
  ASSERT_EQ(plotted.exit_code, 0) << plotted.output;
  EXPECT_EQ(read_file(png).substr(1, 3), "PNG");
  // Nothing but the outputs themselves is left beside them.
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir_ / "out"))
    left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(join(left, " "), "curves.png lr1.csv");
}

std::string dotted_key(int parts) {
  std::string key;
  for (int i = 1; i < parts; ++i)
    key += "a.";
  return key + "b";
}

TEST_F(StoreOutputs, AFiftyThousandPartKeyIsOneErrorLineInAnExperimentAndASweep) {
  // Before: toml++ recursed once per part and the process died of SIGSEGV.
  const std::string exp = dir_ / "deep.toml", sweep = dir_ / "deep_sweep.toml";
  testing::write_text(exp, "[" + dotted_key(50000) + "]\nx = 1\n");
  expect_one_error_line("run " + exp,
                        exp + ":1:129: TOML syntax error: a key of more than 64 dotted parts");
  testing::write_text(sweep,
                      "base = \"" + exp + "\"\n[grid]\n" + dotted_key(50000) + " = [1, 2]\n");
  expect_one_error_line("sweep " + sweep, sweep + ":3:128: TOML syntax error: a key of more than");
  testing::write_text(exp, "[model]\ntype = " + std::string(50000, '[') + "\n");
  expect_one_error_line("run " + exp,
                        exp +
                            ":2:40: TOML syntax error: arrays or inline tables nested more "
                            "than 32 deep");
}

TEST_F(StoreOutputs, WhereFiltersAreBoundedAndLongListsWork) {
  // Before: SIGSEGV (one C++ stack frame per parenthesis).
  const std::string parens = std::string(30000, '(') + "name = lr1" + std::string(30000, ')');
  expect_one_error_line("runs list --where '" + parens + "' --db " + db_path(),
                        "nested more than 32 levels deep at column 33");
  // Before: "parser stack overflow: is it a Kiln run store?", the store blamed for the filter.
  std::vector<std::string> terms;
  for (int i = 0; i < 1000; ++i)
    terms.push_back(fmt::format("name = x{}", i));
  terms[3] = "name = lr3-drift";
  terms[998] = "best_val < 1.8";  // lr3 and lr3-rerun
  const auto listed = run_kiln("runs list --format csv --sort name --where '" +
                               join(terms, " or ") + "' --db " + db_path());
  ASSERT_EQ(listed.exit_code, 0) << listed.output.substr(0, 2000);
  std::vector<std::string> names;
  for (const auto& line : split(listed.output, '\n')) {
    const auto fields = split(line, ',');
    if (fields.size() > 1 && fields[0] != "id") names.push_back(fields[1]);
  }
  EXPECT_EQ(join(names, " "), "lr3 lr3-drift lr3-rerun");
}

using TruncatedShard = testing::TinyRun;

TEST_F(TruncatedShard, EndsTheRunFailedWithOneErrorLine) {
  // Before: the memory-mapped shard raised SIGBUS, and the run stayed 'running' for ever.
  const std::string shard = dir_ / "data/train_000000.bin";
  ASSERT_TRUE(fs::exists(shard));
  const std::string log = dir_ / "run.log";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  bool truncated = false;
  const auto outcome = testing::run_child_until(
      {"run", experiment(), "--name", "cut", "--set", "train.steps=1000000"}, log, "", [&] {
        const std::string rows = testing::scalar(db(), "select count(*) from metrics");
        if (!truncated && !rows.empty() && rows != "0") {
          fs::resize_file(shard, 0);
          truncated = true;
        }
        return std::chrono::steady_clock::now() > deadline;
      });
  ASSERT_TRUE(truncated) << read_file(log);
  EXPECT_FALSE(outcome.killed) << read_file(log);
  EXPECT_EQ(outcome.exit_code, 2) << read_file(log);
  const auto errors = lines_starting(read_file(log), "kiln: error: ");
  ASSERT_EQ(errors.size(), 1u) << read_file(log);
  EXPECT_NE(errors[0].find("token shard '" + shard + "' was truncated while this run read it"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(testing::scalar(db(), "select status from runs where name = 'cut'"), "failed");
}

}  // namespace
}  // namespace kiln
