// A sweep stopped mid-way and run again, through the real binary: the local runner's promise
// that a re-run completes only the unfinished members, resuming them from their snapshots to the
// curves of uninterrupted runs. And the refusals of --launcher slurm that need no Slurm.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
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
using SweepResume = testing::EachSnapshotWriter<>;
using SweepLauncher = testing::TinyRun;

KILN_EACH_SNAPSHOT_WRITER(SweepResume);

const std::string kSteps = "train.steps=300";

TEST_P(SweepResume, AnInterruptedSweepRunAgainCompletesOnlyItsUnfinishedMembersToTheSameCurves) {
  const std::string exp = experiment();
  const std::vector<std::string> sweep = {
      "sweep",          exp,           "--name", "s",     "--grid",
      "run.seed=1,2,3", "--set",       kSteps,   "--set", "checkpoint.every=10",
      "--set",          "eval.every=0"};
  const std::string log = dir_ / "sweep.log";
  const pid_t pid = testing::start_kiln(sweep, log);
  const std::string steps_of_2 =
      "select count(*) from metrics m join runs r on r.id = m.run_id where r.name = "
      "'s/run.seed=2'";
  // The first member completed, the second mid-way, the third not started.
  ASSERT_TRUE(wait_for([&] { return std::atoi(scalar(db(), steps_of_2).c_str()) >= 20; },
                       std::chrono::seconds(120)))
      << testing::read_file(log);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_EQ(WEXITSTATUS(status), 130) << testing::read_file(log);
  const std::string states =
      "select group_concat(name || ':' || status, ' ') from (select * "
      "from runs order by name)";
  ASSERT_EQ(scalar(db(), states), "s/run.seed=1:completed s/run.seed=2:interrupted");
  const std::string finished_1 = "select finished_at from runs where name = 's/run.seed=1'";
  const std::string first_finished = scalar(db(), finished_1);

  std::string args;
  for (size_t i = 0; i < sweep.size(); ++i)
    args += " " + sweep[i];
  auto again = run_kiln(args);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  for (const char* line : {"3 members, 1 completed, 2 to run", "skip s/run.seed=1 (completed)",
                           "start s/run.seed=2 (resume)", "start s/run.seed=3 (new)"}) {
    EXPECT_NE(again.output.find(line), std::string::npos) << line << "\n" << again.output;
  }
  EXPECT_EQ(scalar(db(), states),
            "s/run.seed=1:completed s/run.seed=2:completed s/run.seed=3:completed");
  EXPECT_EQ(scalar(db(), finished_1), first_finished);  // not run again
  EXPECT_EQ(scalar(db(),
                   "select count(*) from resumes r join runs on runs.id = r.run_id "
                   "where name = 's/run.seed=2'"),
            "1");
  // Each member against the same config run whole on its own, outside any sweep.
  for (const char* seed : {"1", "2", "3"}) {
    const std::string twin = std::string("twin") + seed;
    ASSERT_EQ(run_kiln("run " + exp + " --name " + twin + " --set run.seed=" + seed + " --set " +
                       kSteps + " --set eval.every=0")
                  .exit_code,
              0);
    const std::vector<double> member = losses(std::string("s/run.seed=") + seed);
    EXPECT_EQ(member.size(), 300u) << seed;
    EXPECT_EQ(member, losses(twin)) << "seed " << seed;
  }
}

// PATH set for the kiln commands this object's life runs.
class PathFor {
 public:
  explicit PathFor(const std::string& path) : before_(std::getenv("PATH")) {
    ::setenv("PATH", path.c_str(), 1);
  }
  ~PathFor() { ::setenv("PATH", before_.c_str(), 1); }

 private:
  std::string before_;
};

TEST_F(SweepLauncher, SlurmRefusalsThatNeedNoSlurmAreOneLineAndWriteNothing) {
  const std::string exp = experiment();
  const std::string sweep = "sweep " + exp + " --name s --grid run.seed=1,2 --launcher slurm";
  {
    const PathFor no_slurm(dir_ / "empty");
    const auto result = run_kiln(sweep);
    testing::expect_one_error_line(result, sweep, "sbatch is not on PATH");
  }
  EXPECT_FALSE(std::filesystem::exists(db()));
  testing::expect_one_error_line(run_kiln(sweep + " --jobs 2"), sweep + " --jobs 2",
                                 "--max-parallel says how many run at once");
  const std::string local = "sweep " + exp + " --name s --grid run.seed=1,2 --partition gpu";
  testing::expect_one_error_line(run_kiln(local), local, "are for --launcher slurm");
  ::unsetenv("SLURM_ARRAY_TASK_ID");
  const std::string task = "sweep task s --db " + db();
  testing::expect_one_error_line(run_kiln(task), task, "SLURM_ARRAY_TASK_ID is not set");
}

}  // namespace
}  // namespace kiln
