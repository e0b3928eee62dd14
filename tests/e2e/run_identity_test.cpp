// A run's files are its own, through the real binary: a run of the same name in
// another run store, a resume or `runs rm` from another working directory, and names that nest
// (`a` and `a/b`, `x/snapshots/step_000002`, a plain run named like a sweep) never reach another
// run's snapshots. Each test compares with what Kiln did not compute in the same breath: the loss
// curve of an uninterrupted twin, or a file the test wrote itself.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>

#include "tiny_run.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::run_kiln;
using testing::scalar;
using RunIdentity = testing::TinyRun;

// Per-step losses of run `name` in `db`, bit for bit as stored.
std::vector<double> losses_in(const std::string& db, const std::string& name) {
  return testing::query_doubles(
      db, "select loss from metrics join runs on runs.id = run_id where name = '" + name +
              "' order by step");
}

// A started kiln process: its own working directory, output appended to `log`, KILN_FAULT when
// given.
pid_t spawn_kiln(const std::vector<std::string>& args, const std::string& cwd,
                 const std::string& log, const std::string& fault) {
  return testing::start_kiln(args, log, {cwd, fault, true});
}

// How the process ended, as a shell reports it (128 + signal when killed).
int wait_kiln(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run_kiln_at(const std::string& cwd, const std::vector<std::string>& args,
                const std::string& log, const std::string& fault = "") {
  return wait_kiln(spawn_kiln(args, cwd, log, fault));
}

// Why 1: `kiln resume x --db b.db` went on from the snapshot of run x of a.db (another schedule),
// and pruned its own as "older".
TEST_F(RunIdentity, ASecondRunOfTheSameNameInAnotherStoreNeverResumesFromTheFirstsSnapshot) {
  const std::string exp = experiment("[checkpoint]\nevery = 4\n");
  const std::string a = dir_ / "a.db", b = dir_ / "b.db", log = dir_ / "x.log";
  auto first = run_kiln("run " + exp + " --name x --set eval.every=0 --set train.steps=12 " +
                        "--set run.db=" + a);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // The second x: another schedule, killed right after its first snapshot is on disk.
  const std::vector<std::string> second = {
      "run",          exp,     "--name",         "x",     "--set",
      "eval.every=0", "--set", "train.steps=24", "--set", "run.db=" + b};
  ASSERT_EQ(run_kiln_at(dir_.str(), second, log, "snapshot.published:1"), 128 + SIGKILL)
      << testing::read_file(log);
  auto resumed = run_kiln("resume x --db " + b);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming after step 4 "), std::string::npos) << resumed.output;

  auto twin = run_kiln("run " + exp + " --name twin --set eval.every=0 --set train.steps=24 " +
                       "--set run.db=" + b);
  ASSERT_EQ(twin.exit_code, 0) << twin.output;
  const auto expected = losses_in(b, "twin");
  ASSERT_EQ(expected.size(), 24u);
  EXPECT_EQ(losses_in(b, "x"), expected);
  // The first x still has its own last snapshot.
  auto eval = run_kiln("eval x --steps 1 --db " + a);
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find("step_000012"), std::string::npos) << eval.output;
}

// Why 3: a relative run.out_dir was resolved against the current directory by resume (which then
// started again from step 0) and by `runs rm` (which deleted an unrelated folder).
TEST_F(RunIdentity, ResumeAndRemoveFromAnotherDirectoryFindTheRunsOwnFolder) {
  const std::string exp = experiment("[checkpoint]\nevery = 4\n");
  const std::string here = dir_ / "here", there = dir_ / "there";
  fs::create_directories(here);
  fs::create_directories(there);
  const std::vector<std::string> run = {
      "run",          exp,     "--name",         "r",     "--set",
      "eval.every=0", "--set", "train.steps=16", "--set", "run.out_dir=runs"};
  const std::string log = dir_ / "r.log";
  ASSERT_EQ(run_kiln_at(here, run, log, "snapshot.published:2"), 128 + SIGKILL)
      << testing::read_file(log);
  ASSERT_EQ(run_kiln_at(there, {"resume", "r", "--db", db()}, log), 0) << testing::read_file(log);
  const std::string output = testing::read_file(log);
  EXPECT_NE(output.find("resuming after step 8 "), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(there + "/runs")) << "resume made a folder in the other directory";

  auto twin = run_kiln("run " + exp + " --name twin --set eval.every=0 --set train.steps=16");
  ASSERT_EQ(twin.exit_code, 0) << twin.output;
  ASSERT_EQ(losses("twin").size(), 16u);
  EXPECT_EQ(losses("r"), losses("twin"));

  // An unrelated folder at the same relative path in the other directory.
  testing::write_text(there + "/runs/r/keep.txt", "not kiln's");
  ASSERT_EQ(run_kiln_at(there, {"runs", "rm", "r", "--yes", "--db", db()}, log), 0)
      << testing::read_file(log);
  EXPECT_EQ(testing::read_file(there + "/runs/r/keep.txt"), "not kiln's");
  // And the run's own folder went: nothing is left in the directory it was started in.
  EXPECT_TRUE(fs::is_directory(here + "/runs"));
  EXPECT_TRUE(fs::is_empty(here + "/runs")) << fs::directory_iterator(here + "/runs")->path();
}

// An imported run keeps its uuid and folder, so `runs rm` in the importing store could delete
// the folder the original store still lists, whose later eval would say "the run took none".
// So the folder's marker lists both stores: rm in either keeps the folder for the other
// (one warning line), rm in the last deletes it; an eval from the original reads the same loss
// before and after.
TEST_F(RunIdentity, RemovingAnImportedRunKeepsTheFolderTheOriginalStoreStillUses) {
  const std::string exp = experiment();
  auto made = run_kiln("run " + exp + " --name r --set train.steps=8 --set checkpoint.every=4");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::string imported = dir_ / "imported.db";
  auto copied = run_kiln("runs import " + db() + " --db " + imported);
  ASSERT_EQ(copied.exit_code, 0) << copied.output;
  const std::string folder = scalar(db(), "select folder from runs where name = 'r'");
  const auto marker = nlohmann::json::parse(testing::read_file(folder + "/run.json"));
  EXPECT_EQ(marker["stores"], (nlohmann::json{db(), imported})) << marker.dump();
  auto before = run_kiln("eval r --db " + db());
  ASSERT_EQ(before.exit_code, 0) << before.output;

  auto removed = run_kiln("runs rm r --yes --db " + imported);
  ASSERT_EQ(removed.exit_code, 0) << removed.output;
  EXPECT_NE(removed.output.find("kept '" + folder + "': run 'r' is also in the run store " + db()),
            std::string::npos)
      << removed.output;
  ASSERT_TRUE(fs::is_directory(folder + "/snapshots"));
  auto after = run_kiln("eval r --db " + db());
  ASSERT_EQ(after.exit_code, 0) << after.output;
  const auto loss_line = [](const std::string& out) {
    const size_t at = out.find("loss");
    return at == std::string::npos ? out : out.substr(at);
  };
  EXPECT_EQ(loss_line(after.output), loss_line(before.output));
  // Snapshots the store lists that are gone from disk are said to be gone, not never taken.
  fs::rename(folder + "/snapshots", dir_ / "moved_snapshots");
  testing::expect_one_error_line(run_kiln("eval r --db " + db()), "eval r",
                                 "snapshots in its run store (step_0000");
  EXPECT_NE(run_kiln("eval r --db " + db()).output.find("but none of them is on disk"),
            std::string::npos);
  fs::rename(dir_ / "moved_snapshots", folder + "/snapshots");

  auto last = run_kiln("runs rm r --yes --db " + db());
  ASSERT_EQ(last.exit_code, 0) << last.output;
  EXPECT_FALSE(fs::exists(folder)) << last.output;
}

// Why 4: names nest. `runs rm a` deleted a/b's snapshots; x's pruning deleted the run named
// x/snapshots/step_000002; a plain run named like a sweep sat among its members.
TEST_F(RunIdentity, NestedNamesCannotReachEachOthersFiles) {
  const std::string exp = experiment("[checkpoint]\nevery = 2\nkeep = 1\n");
  const std::string settings = " --set eval.every=0 --set train.steps=4";
  for (const char* name : {"a/b", "a", "x/snapshots/step_000002", "x"}) {
    auto made = run_kiln("run " + exp + " --name " + name + settings);
    ASSERT_EQ(made.exit_code, 0) << name << ": " << made.output;
  }
  auto removed = run_kiln("runs rm a --yes --db " + db());
  ASSERT_EQ(removed.exit_code, 0) << removed.output;
  for (const char* name : {"a/b", "x/snapshots/step_000002"}) {
    auto eval = run_kiln(std::string("eval ") + name + " --steps 1 --db " + db());
    EXPECT_EQ(eval.exit_code, 0) << name << ": " << eval.output;
    EXPECT_NE(eval.output.find("step_000004"), std::string::npos) << name << ": " << eval.output;
  }

  // A sweep's members, then a plain run named like the sweep in the same store, and one named
  // like a member in another store; removing the plain runs leaves every member its snapshot.
  testing::write_text(dir_ / "sw.toml", "base = \"" + exp +
                                            "\"\nseeds = [1, 2]\n[set]\ntrain.steps = 4\n"
                                            "eval.every = 0\n");
  auto swept = run_kiln("sweep " + (dir_ / "sw.toml"));
  ASSERT_EQ(swept.exit_code, 0) << swept.output;
  const std::string other = dir_ / "other.db";
  ASSERT_EQ(run_kiln("run " + exp + " --name sw" + settings).exit_code, 0);
  auto plain = run_kiln("run " + exp + " --name sw/run.seed=1 --set eval.every=0 " +
                        "--set train.steps=6 --set run.db=" + other);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(run_kiln("runs rm sw --yes --db " + db()).exit_code, 0);
  for (const char* member : {"sw/run.seed=1", "sw/run.seed=2"}) {
    auto eval = run_kiln(std::string("eval ") + member + " --steps 1 --db " + db());
    EXPECT_EQ(eval.exit_code, 0) << member << ": " << eval.output;
    EXPECT_NE(eval.output.find("step_000004"), std::string::npos) << member << ": " << eval.output;
  }
}

// Runs SQL on the store, as a hand would.
void exec_sql(const std::string& db, const std::string& sql) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(raw);
  sqlite3_close(raw);
}

// A run as an older kiln left it: no folder in its row (so <out_dir>/<name>), snapshots whose
// manifests name no run. It resumes from the snapshots its store lists, never from another one
// in its folder, and `runs rm` leaves its folder.
TEST_F(RunIdentity, ARunFromBeforeRunIdentitiesResumesFromTheSnapshotsItsStoreLists) {
  const std::string exp = experiment("[checkpoint]\nevery = 4\n");
  const std::string log = dir_ / "old.log";
  const std::vector<std::string> run = {"run",          exp,     "--name",        "old", "--set",
                                        "eval.every=0", "--set", "train.steps=16"};
  // Killed while writing its third snapshot: steps 4 and 8 are on disk and in the store.
  ASSERT_EQ(run_kiln_at(dir_.str(), run, log, "snapshot.partial:3"), 128 + SIGKILL)
      << testing::read_file(log);
  auto other = run_kiln("run " + exp + " --name other --set eval.every=0 --set train.steps=10 " +
                        "--set checkpoint.every=10 --set run.seed=9");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  const std::string legacy = dir_ / "runs/old";
  fs::rename(folder_of("old"), legacy);
  exec_sql(db(), "update runs set folder = null where name = 'old'");
  fs::copy(folder_of("other") + "/snapshots/step_000010", legacy + "/snapshots/step_000010",
           fs::copy_options::recursive);
  for (const auto& snapshot : fs::directory_iterator(legacy + "/snapshots")) {
    const std::string path = (snapshot.path() / "manifest.json").string();
    if (!fs::exists(path)) continue;  // step_000012.tmp, the write the kill cut short
    auto manifest = nlohmann::json::parse(testing::read_file(path));
    manifest.erase("run");
    manifest.erase("config_hash");
    testing::write_text(path, manifest.dump());
  }

  auto resumed = run_kiln("resume old --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming after step 8 "), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("step_000010' names no run, and the run store does not list it"),
            std::string::npos)
      << resumed.output;
  auto twin = run_kiln("run " + exp + " --name twin --set eval.every=0 --set train.steps=16");
  ASSERT_EQ(twin.exit_code, 0) << twin.output;
  ASSERT_EQ(losses("twin").size(), 16u);
  EXPECT_EQ(losses("old"), losses("twin"));

  auto removed = run_kiln("runs rm old --yes --db " + db());
  ASSERT_EQ(removed.exit_code, 0) << removed.output;
  EXPECT_NE(removed.output.find("made before Kiln marked run folders"), std::string::npos)
      << removed.output;
  EXPECT_TRUE(fs::is_directory(legacy + "/snapshots/step_000010"));
}

// Runs with colliding names across two run stores and two working directories (relative and
// absolute run.out_dir, nested names), each started, SIGKILLed after a snapshot, resumed from the
// other directory, killed again and resumed to the end: every curve must be its uninterrupted
// twin's, bit for bit.
TEST_F(RunIdentity, KilledAndResumedRunsWithCollidingNamesEndAsTheirTwins) {
  const std::string exp = experiment("[checkpoint]\nevery = 3\nkeep = 1\n");
  const std::string one = dir_ / "one.db", two = dir_ / "two.db", twins = dir_ / "twins.db";
  const std::string w1 = dir_ / "w1", w2 = dir_ / "w2";
  fs::create_directories(w1);
  fs::create_directories(w2);
  struct Case {
    std::string name, db, out_dir, start_in, resume_in;
    int steps, seed;
  };
  const std::string shared = dir_ / "runs";
  const std::vector<Case> cases = {
      {"x", one, shared, w1, w2, 9, 1},   {"x", two, shared, w2, w1, 12, 2},
      {"a", one, "runs", w1, w2, 9, 3},   {"a", two, "runs", w1, w2, 12, 4},
      {"a/b", one, "runs", w1, w1, 9, 5}, {"a/b", two, shared, w2, w2, 12, 6},
  };
  auto args_of = [&](const Case& c, const std::string& db, const std::string& name,
                     const std::string& out_dir) {
    return std::vector<std::string>{"run",    exp,
                                    "--name", name,
                                    "--set",  "eval.every=0",
                                    "--set",  "train.steps=" + std::to_string(c.steps),
                                    "--set",  "run.seed=" + std::to_string(c.seed),
                                    "--set",  "run.db=" + db,
                                    "--set",  "run.out_dir=" + out_dir};
  };
  auto log_of = [&](size_t i) { return dir_ / ("case" + std::to_string(i) + ".log"); };
  // Each round starts every case's next process at once and waits for them all.
  auto round = [&](const std::function<pid_t(size_t)>& start, int expected) {
    std::vector<pid_t> pids;
    for (size_t i = 0; i < cases.size(); ++i)
      pids.push_back(start(i));
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(wait_kiln(pids[i]), expected) << cases[i].name << " in " << cases[i].db << ":\n"
                                              << testing::read_file(log_of(i));
    }
  };
  const int killed = 128 + SIGKILL;
  round(
      [&](size_t i) {
        const Case& c = cases[i];
        return spawn_kiln(args_of(c, c.db, c.name, c.out_dir), c.start_in, log_of(i),
                          "snapshot.published:1");
      },
      killed);
  round(
      [&](size_t i) {
        const Case& c = cases[i];
        return spawn_kiln({"resume", c.name, "--db", c.db}, c.resume_in, log_of(i),
                          "snapshot.published:1");
      },
      killed);
  round(
      [&](size_t i) {
        const Case& c = cases[i];
        return spawn_kiln({"resume", c.name, "--db", c.db}, c.start_in, log_of(i), "");
      },
      0);
  round(
      [&](size_t i) {
        const Case& c = cases[i];
        return spawn_kiln(args_of(c, twins, "twin" + std::to_string(i), dir_ / "twins"), dir_.str(),
                          log_of(i), "");
      },
      0);
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const auto expected = losses_in(twins, "twin" + std::to_string(i));
    ASSERT_EQ(expected.size(), static_cast<size_t>(c.steps)) << testing::read_file(log_of(i));
    EXPECT_EQ(losses_in(c.db, c.name), expected) << c.name << " in " << c.db;
    EXPECT_EQ(scalar(c.db, "select status from runs where name = '" + c.name + "'"), "completed");
  }
}

}  // namespace
}  // namespace kiln
