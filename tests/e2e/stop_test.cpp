// How runs and sweeps stop, through the real binary: a second Ctrl-C, a snapshot left half
// written by a kill, a sweep stopped by a signal, and runs whose updates were skipped.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "snapshot_writers.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::scalar;
using testing::wait_for;
using Stop = testing::EachSnapshotWriter<>;
using SkippedUpdates = testing::TinyRun;
namespace fs = std::filesystem;

// The exit code as a shell reports it; SIGKILLs the process after `limit` (and says so).
int wait_exit(pid_t pid, std::chrono::seconds limit) {
  int status = 0;
  if (!wait_for([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, limit)) {
    ADD_FAILURE() << "kiln did not stop within " << limit.count() << " s";
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The steps of run `name` the store holds so far (rows are committed about once a second).
int64_t steps_stored(const std::string& db, const std::string& name) {
  const std::string steps =
      scalar(db, "select count(*) from metrics m join runs r on r.id = m.run_id where r.name = '" +
                     name + "'");
  return steps.empty() ? 0 : std::stoll(steps);
}

// The folders a snapshot writer left unfinished: `<label>.tmp`.
std::vector<std::string> unfinished_snapshots(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".tmp") names.push_back(entry.path().filename().string());
  }
  return names;
}

// The snapshots folder of run `name` under `out_dir`: in its folder `<name>@<id>`.
std::string snapshots_of(const std::string& out_dir, const std::string& name) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
    if (entry.path().filename().string().rfind(name + "@", 0) == 0) {
      return (entry.path() / "snapshots").string();
    }
  }
  ADD_FAILURE() << "no folder of run " << name << " in " << out_dir;
  return "";
}

KILN_EACH_SNAPSHOT_WRITER(Stop);

const std::string kLong = " --set train.steps=300 --set checkpoint.every=10 --set eval.every=0";

TEST_P(Stop, ASecondSignalMarksTheRunInterruptedAndItResumesToTheSameCurve) {
  const std::string exp = experiment();
  ASSERT_EQ(run_kiln("run " + exp + " --name twin" + kLong).exit_code, 0);

  const std::string log = dir_ / "victim.log";
  const pid_t pid = testing::start_kiln({"run", exp, "--name", "victim", "--set", "train.steps=300",
                                         "--set", "checkpoint.every=10", "--set", "eval.every=0"},
                                        log);
  ASSERT_TRUE(
      wait_for([&] { return steps_stored(db(), "victim") >= 20; }, std::chrono::seconds(120)))
      << testing::read_file(log);
  // Two signals a few milliseconds apart: the second comes while the process still works on the
  // first one (its current step, or the snapshot after it).
  ::kill(pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  ::kill(pid, SIGINT);
  const int code = wait_exit(pid, std::chrono::seconds(60));
  const std::string output = testing::read_file(log);
  EXPECT_EQ(code, 130) << output;
  EXPECT_EQ(scalar(db(), "select status from runs where name = 'victim'"), "interrupted") << output;
  EXPECT_TRUE(unfinished_snapshots(snapshots_of(dir_ / "runs", "victim")).empty()) << output;

  auto resumed = run_kiln("resume victim --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(scalar(db(), "select status from runs where name = 'victim'"), "completed");
  const std::vector<double> twin = losses("twin"), victim = losses("victim");
  ASSERT_EQ(twin.size(), 300u);
  ASSERT_EQ(victim.size(), 300u);
  for (size_t i = 0; i < twin.size(); ++i)
    ASSERT_EQ(twin[i], victim[i]) << "step " << i + 1;
}

TEST_P(Stop, ResumeRemovesASnapshotLeftHalfWrittenAndEndsWithTheSameCurve) {
  const std::string exp = experiment();
  const std::string settings = " --set train.steps=20 --set checkpoint.every=5 --set eval.every=0";
  ASSERT_EQ(run_kiln("run " + exp + " --name twin" + settings).exit_code, 0);
  // Killed while writing step 10's snapshot: model.pt written, the rest not.
  const testing::Outcome killed =
      testing::run_child({"run", exp, "--name", "half", "--set", "train.steps=20", "--set",
                          "checkpoint.every=5", "--set", "eval.every=0"},
                         dir_ / "half.log", "snapshot.partial:2");
  ASSERT_TRUE(killed.killed) << testing::read_file(dir_ / "half.log");
  const std::string snapshots = snapshots_of(dir_ / "runs", "half");
  ASSERT_EQ(unfinished_snapshots(snapshots), std::vector<std::string>{"step_000010.tmp"});

  // Snapshots every 3 steps from here: none of them is step 10, whose folder would be replaced.
  auto resumed = run_kiln("resume half --set checkpoint.every=3 --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("removed step_000010.tmp"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming after step 5"), std::string::npos) << resumed.output;
  EXPECT_TRUE(unfinished_snapshots(snapshots).empty());
  EXPECT_EQ(losses("half"), losses("twin"));
}

// The labels of the snapshots the store lists for run `name`, in step order.
std::string listed_snapshots(const std::string& db, const std::string& name) {
  return scalar(db,
                "select group_concat(label, ' ') from (select label from snapshots s join runs r "
                "on r.id = s.run_id where r.name = '" +
                    name + "' order by s.step)");
}

// A stop signal (Ctrl-C, or SIGTERM as Slurm sends it) that comes while a snapshot is being
// written lets that snapshot finish: it is in place and listed, the run snapshots the step it
// stops after, ends interrupted with exit code 130, and resumes from that step to the curve of a
// run never stopped. The process is frozen (SIGSTOP) inside the writer of step 10's snapshot,
// every file synced and no manifest yet (on the background thread with checkpoint.async, while
// training goes on), signalled, and let go.
TEST_P(Stop, ASignalDuringASnapshotsWritingLetsItFinishAndTheRunResumesFromTheStepItStopped) {
  const std::string exp = experiment();
  const std::vector<std::string> settings = {
      "--set", "train.steps=30", "--set", "checkpoint.every=10", "--set", "eval.every=0"};
  std::string twin = "run " + exp + " --name twin";
  for (const auto& word : settings)
    twin += " " + word;
  ASSERT_EQ(run_kiln(twin).exit_code, 0);
  for (const int signal : {SIGINT, SIGTERM}) {
    const std::string name = signal == SIGINT ? "int" : "term", log = dir_ / (name + ".log");
    SCOPED_TRACE(name);
    std::vector<std::string> args = {"run", exp, "--name", name};
    args.insert(args.end(), settings.begin(), settings.end());
    ::setenv("KILN_FAULT_SIGNAL", "STOP", 1);
    const pid_t pid = testing::start_kiln(args, log, {"", "snapshot.unlisted:1", false});
    ::unsetenv("KILN_FAULT_SIGNAL");
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, WUNTRACED), pid);
    ASSERT_TRUE(WIFSTOPPED(status)) << testing::read_file(log);
    const std::string snapshots = snapshots_of(dir_ / "runs", name);
    EXPECT_EQ(unfinished_snapshots(snapshots), std::vector<std::string>{"step_000010.tmp"});
    ::kill(pid, signal);
    ::kill(pid, SIGCONT);
    const int code = wait_exit(pid, std::chrono::seconds(60));
    const std::string output = testing::read_file(log);
    EXPECT_EQ(code, 130) << output;
    EXPECT_EQ(output.find("a second stop signal"), std::string::npos) << output;
    EXPECT_EQ(scalar(db(), "select status from runs where name = '" + name + "'"), "interrupted");
    const int64_t stopped = steps_stored(db(), name);
    ASSERT_GT(stopped, 10) << output;  // the signal came after step 10's end
    ASSERT_LT(stopped, 30) << output;
    EXPECT_EQ(listed_snapshots(db(), name), fmt::format("step_000010 step_{:06d}", stopped))
        << output;
    EXPECT_TRUE(unfinished_snapshots(snapshots).empty());

    auto resumed = run_kiln("resume " + name + " --db " + db());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find(fmt::format("resuming after step {}", stopped)),
              std::string::npos)
        << resumed.output;
    EXPECT_EQ(losses(name), losses("twin"));
  }
}

// A second signal while the run's last snapshot is written drops that snapshot, as a second
// Ctrl-C promises: the run ends interrupted with exit code 130, without a snapshot of its last
// step, and resumes from the one before to the uninterrupted curve. The process is frozen inside
// the writer of step 20's snapshot and sent SIGINT and SIGTERM (two signals, taken as two) before
// it goes on; with checkpoint.async the training thread is then waiting for the background save,
// and must take them while it waits.
TEST_P(Stop, ASecondSignalWhileTheLastSnapshotIsWrittenDropsIt) {
  const std::string exp = experiment();
  const std::string settings = " --set train.steps=20 --set checkpoint.every=10 --set eval.every=0";
  ASSERT_EQ(run_kiln("run " + exp + " --name twin" + settings).exit_code, 0);
  const std::string log = dir_ / "dropped.log";
  ::setenv("KILN_FAULT_SIGNAL", "STOP", 1);
  const pid_t pid = testing::start_kiln({"run", exp, "--name", "dropped", "--set", "train.steps=20",
                                         "--set", "checkpoint.every=10", "--set", "eval.every=0"},
                                        log, {"", "snapshot.unlisted:2", false});
  ::unsetenv("KILN_FAULT_SIGNAL");
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, WUNTRACED), pid);
  ASSERT_TRUE(WIFSTOPPED(status)) << testing::read_file(log);
  ::kill(pid, SIGINT);
  ::kill(pid, SIGTERM);
  ::kill(pid, SIGCONT);
  const int code = wait_exit(pid, std::chrono::seconds(60));
  const std::string output = testing::read_file(log);
  EXPECT_EQ(code, 130) << output;
  EXPECT_NE(output.find("a second stop signal: stopping without a snapshot of this step; `kiln "
                        "resume dropped` continues from its last snapshot (step 10)"),
            std::string::npos)
      << output;
  EXPECT_EQ(scalar(db(), "select status from runs where name = 'dropped'"), "interrupted");
  EXPECT_EQ(listed_snapshots(db(), "dropped"), "step_000010") << output;
  EXPECT_TRUE(unfinished_snapshots(snapshots_of(dir_ / "runs", "dropped")).empty());

  auto resumed = run_kiln("resume dropped --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming after step 10 "), std::string::npos) << resumed.output;
  EXPECT_EQ(losses("dropped"), losses("twin"));
}

TEST_P(Stop, ASweepStoppedByASignalExits130) {
  const std::string exp = experiment();
  const std::string log = dir_ / "sweep.log";
  const pid_t pid = testing::start_kiln({"sweep", exp, "--name", "s", "--grid", "run.seed=1,2",
                                         "--set", "train.steps=100000", "--set", "eval.every=0"},
                                        log);
  ASSERT_TRUE(
      wait_for([&] { return steps_stored(db(), "s/run.seed=1") >= 1; }, std::chrono::seconds(120)))
      << testing::read_file(log);
  ::kill(pid, SIGINT);  // the sweep alone: it passes the signal on to its member
  const int code = wait_exit(pid, std::chrono::seconds(60));
  const std::string output = testing::read_file(log);
  EXPECT_EQ(code, 130) << output;
  EXPECT_EQ(scalar(db(), "select status from runs where name = 's/run.seed=1'"), "interrupted")
      << output;
  EXPECT_EQ(scalar(db(), "select count(*) from runs where name = 's/run.seed=2'"), "0") << output;
}

// A learning rate of 1e4 sends this model's loss to ~1e9 on step 2 and its gradients to NaN
// from step 3 on (as in fault_test.cpp); "skip" steps over each of those updates.
const std::string kDivergingSkip =
    " --set optimizer.lr=1e4 --set train.grad_clip=0 --set eval.every=0 --set train.steps=12"
    " --set train.on_nonfinite=skip";

TEST_F(SkippedUpdates, MostlySkippedUpdatesAreCountedInTheSummaryAndInRunsShow) {
  auto run = run_kiln("run " + experiment() + " --name most" + kDivergingSkip);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(scalar(db(), "select status from runs where name = 'most'"), "completed");
  // Counted here from the per-step rows, not from Kiln's summary.
  const std::string skipped = scalar(db(), "select sum(skipped) from metrics");
  ASSERT_GT(std::stoi(skipped), 6) << run.output;  // most of the 12
  EXPECT_NE(run.output.find("| " + skipped + " of 12 updates skipped"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("warning: most of the run's updates were skipped"), std::string::npos)
      << run.output;
  auto show = run_kiln("runs show most --db " + db());
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("skipped      " + skipped + " of 12 updates"), std::string::npos)
      << show.output;
}

TEST_F(SkippedUpdates, ARunWhoseEveryUpdateWasSkippedFailsWithExitCode4) {
  const std::string exp = experiment();
  // Every step's gradients get an inf (core/util/fault.h). NaN weights from model.init_from did
  // this before they were refused at load.
  ::setenv("KILN_FAULT", "grad.nonfinite:1+", 1);
  auto run = run_kiln("run " + exp +
                      " --name none --set train.steps=5 --set eval.every=0 "
                      "--set train.on_nonfinite=skip");
  ::unsetenv("KILN_FAULT");
  EXPECT_EQ(run.exit_code, 4) << run.output;
  EXPECT_EQ(scalar(db(),
                   "select count(*) || ' ' || sum(skipped) from metrics m join runs r on r.id = "
                   "m.run_id where r.name = 'none'"),
            "5 5")
      << run.output;
  EXPECT_EQ(scalar(db(), "select status from runs where name = 'none'"), "failed");
  EXPECT_NE(scalar(db(), "select error from runs where name = 'none'")
                .find("none of the run's 5 updates was applied"),
            std::string::npos);
  EXPECT_NE(run.output.find("kiln: error: none of the run's 5 updates was applied"),
            std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace kiln
