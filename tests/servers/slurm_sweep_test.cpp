// Sweeps through a real Slurm (tests/support/slurm_cluster.h starts a one-node cluster of this
// machine for this file): a job array that matches the same sweep run locally, a cancelled
// member resumed by `kiln sweep resubmit`, a task that the time-limit signal requeues, and the
// refusals of a bad submission. Each member is compared with a run Kiln made without Slurm.
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "server_unavailable.h"
#include "slurm_cluster.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::job_of;
using testing::run_kiln;
using testing::scalar;
using testing::shell;
using testing::wait_for;

// Long enough to be stopped mid-way, snapshots every 10 steps.
const std::string kLong =
    " --set train.steps=400 --set checkpoint.every=10 --set eval.every=0 --set run.seed=1";

class SlurmSweep : public testing::TinyRun {
 protected:
  static void SetUpTestSuite() { cluster_ = testing::SlurmCluster::start(why_); }
  static void TearDownTestSuite() { cluster_.reset(); }

  void SetUp() override {
    if (!cluster_) KILN_SERVER_UNAVAILABLE("a one-node Slurm cannot start here: " + why_);
    TinyRun::SetUp();
  }

  std::string status(const std::string& run) {
    return scalar(db(), "select status from runs where name = '" + run + "'");
  }
  int64_t steps_stored(const std::string& run) {
    const std::string n = scalar(
        db(), "select count(*) from metrics m join runs r on r.id = m.run_id where r.name = '" +
                  run + "'");
    return n.empty() ? 0 : std::stoll(n);
  }
  bool job_gone(const std::string& job) {
    return shell("squeue -h -j " + job).output.find(job) == std::string::npos;
  }
  // What the cluster and the member said, for a failure's message.
  std::string story(const std::string& sweep) {
    return shell("cat " + (dir_ / "runs/") + sweep + "/slurm/*.out " + (dir_ / "runs/") + sweep +
                 "/*/console.log")
               .output +
           cluster_->logs();
  }

  // Submits a one-member sweep of kLong (and `extra` settings); its job id.
  std::string submit_long(const std::string& name, const std::string& extra = "") {
    auto submitted = run_kiln("sweep " + experiment() + " --name " + name + " --grid run.seed=1" +
                              kLong + extra + " --launcher slurm");
    EXPECT_EQ(submitted.exit_code, 0) << submitted.output;
    return job_of(submitted.output);
  }

  inline static std::unique_ptr<testing::SlurmCluster> cluster_;
  inline static std::string why_;
};

const std::string kGrid =
    " --grid optimizer.lr=1e-3,1e-2 --grid run.seed=1,2 --set train.steps=8 --set eval.every=0";

TEST_F(SlurmSweep, FourMembersTwoAtATimeMatchTheSameSweepRunLocally) {
  const std::string exp = experiment();
  auto local = run_kiln("sweep " + exp + " --name loc" + kGrid);
  ASSERT_EQ(local.exit_code, 0) << local.output;
  auto submitted = run_kiln("sweep " + exp + " --name sl" + kGrid +
                            " --launcher slurm --cpus-per-task 1 --max-parallel 2");
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string job = job_of(submitted.output);
  ASSERT_FALSE(job.empty()) << submitted.output;
  EXPECT_NE(testing::read_file(dir_ / "runs/sl/slurm/sweep.sbatch").find("--array=0-3%2\n"),
            std::string::npos);
  size_t most_running = 0;
  const bool done = wait_for(
      [&] {
        const std::string running = shell("squeue -h -t RUNNING -o %i").output;
        most_running =
            std::max<size_t>(most_running, std::count(running.begin(), running.end(), '\n'));
        return job_gone(job);
      },
      std::chrono::seconds(240));
  ASSERT_TRUE(done) << story("sl");
  EXPECT_LE(most_running, 2u);
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'sl' and status = 'completed'"),
            "4")
      << story("sl");
  for (const char* member : {"optimizer.lr=1e-3,run.seed=1", "optimizer.lr=1e-3,run.seed=2",
                             "optimizer.lr=1e-2,run.seed=1", "optimizer.lr=1e-2,run.seed=2"}) {
    const std::vector<double> slurm = losses(std::string("sl/") + member);
    EXPECT_EQ(slurm.size(), 8u) << member;
    EXPECT_EQ(slurm, losses(std::string("loc/") + member)) << member;
  }
  auto shown = run_kiln("sweep status sl --db " + db());
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_NE(shown.output.find("4 completed"), std::string::npos) << shown.output;
}

TEST_F(SlurmSweep, AMemberWhoseJobIsCancelledIsResumedByResubmitToTheSameCurve) {
  ASSERT_EQ(run_kiln("run " + experiment() + " --name twin" + kLong).exit_code, 0);
  const std::string job = submit_long("c");
  ASSERT_TRUE(
      wait_for([&] { return steps_stored("c/run.seed=1") >= 20; }, std::chrono::seconds(120)))
      << story("c");
  ASSERT_EQ(shell("scancel " + job).exit_code, 0);
  ASSERT_TRUE(wait_for([&] { return job_gone(job); }, std::chrono::seconds(60))) << story("c");
  ASSERT_EQ(status("c/run.seed=1"), "interrupted") << story("c");
  ASSERT_LT(steps_stored("c/run.seed=1"), 400) << story("c");

  auto resubmitted = run_kiln("sweep resubmit c --db " + db());
  ASSERT_EQ(resubmitted.exit_code, 0) << resubmitted.output;
  EXPECT_NE(resubmitted.output.find("resubmitted 1 members"), std::string::npos)
      << resubmitted.output;
  const std::string again = job_of(resubmitted.output);
  ASSERT_TRUE(wait_for([&] { return job_gone(again); }, std::chrono::seconds(120))) << story("c");
  ASSERT_EQ(status("c/run.seed=1"), "completed") << story("c");
  const std::vector<double> twin = losses("twin"), resumed = losses("c/run.seed=1");
  ASSERT_EQ(twin.size(), 400u);
  EXPECT_EQ(resumed, twin);
}

// Slurm sends the batch shell SIGUSR1 before a task's time limit (the script's --signal); here
// scancel sends it at once. The member writes its snapshots in the background (checkpoint.async;
// the cancelled member above, on the training thread): the one of the step it stopped after is
// put in place before it ends, and the requeued task resumes from it to the curve of a run that
// saved synchronously.
TEST_F(SlurmSweep, TheTimeLimitSignalLeavesAnInterruptedMemberThatItsRequeueCompletes) {
  ASSERT_EQ(run_kiln("run " + experiment() + " --name twin" + kLong).exit_code, 0);
  const std::string job = submit_long("p", " --set checkpoint.async=true");
  ASSERT_TRUE(
      wait_for([&] { return steps_stored("p/run.seed=1") >= 20; }, std::chrono::seconds(120)))
      << story("p");
  ASSERT_EQ(shell("scancel --batch --signal=USR1 " + job + "_0").exit_code, 0);
  ASSERT_TRUE(
      wait_for([&] { return status("p/run.seed=1") == "interrupted"; }, std::chrono::seconds(60)))
      << story("p");
  ASSERT_TRUE(wait_for([&] { return status("p/run.seed=1") == "completed" && job_gone(job); },
                       std::chrono::seconds(180)))
      << story("p");
  const std::string slurm_log = shell("cat " + (dir_ / "runs/p/slurm/*.out")).output;
  EXPECT_NE(slurm_log.find("requeued Slurm task " + job + "_0"), std::string::npos) << slurm_log;
  EXPECT_EQ(scalar(db(),
                   "select count(*) from resumes r join runs on runs.id = r.run_id where "
                   "name = 'p/run.seed=1'"),
            "1");
  const std::string console = testing::read_file(folder_of("p/run.seed=1") + "/console.log");
  std::smatch stopped;
  ASSERT_TRUE(std::regex_search(console, stopped, std::regex("interrupted (\\d+) of 400 steps")))
      << console;
  EXPECT_NE(console.find("resuming after step " + stopped[1].str() + " "), std::string::npos)
      << console;
  EXPECT_EQ(losses("p/run.seed=1"), losses("twin"));
}

// Two Slurm tasks for one member: its ranks run under srun, which sets SLURM_PROCID and
// SLURM_NTASKS, and the task gives them MASTER_ADDR. ddp on two Gloo ranks follows the
// single-process curve within 1e-4 (as tests/e2e/distributed_test.cpp has it without Slurm).
TEST_F(SlurmSweep, AMemberOfTwoRanksRunsThemUnderSrun) {
  // Two tasks on one node need two CPUs there, as `slurmd -C` counts them (a 1-vCPU VM has one).
  const std::string node = shell("/usr/sbin/slurmd -C").output;
  const size_t cpus_at = node.find("CPUs=");
  if (cpus_at != std::string::npos && std::stoi(node.substr(cpus_at + 5)) < 2) {
    GTEST_SKIP() << "SKIP: this node has one CPU, where two Slurm tasks cannot both be placed";
  }
  const std::string exp = experiment();
  // The same global batch on one process and on two: 256 tokens a step.
  const std::string steps =
      " --set train.steps=8 --set eval.every=0 --set run.seed=1 --set train.micro_batch=4 "
      "--set train.batch_tokens=256";
  ASSERT_EQ(run_kiln("run " + exp + " --name single" + steps).exit_code, 0);
  auto submitted = run_kiln("sweep " + exp + " --name r --grid parallel.type=ddp" + steps +
                            " --launcher slurm --sbatch-arg=--ntasks-per-node=2");
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string job = job_of(submitted.output);
  ASSERT_TRUE(wait_for([&] { return job_gone(job); }, std::chrono::seconds(180))) << story("r");
  const std::string member = "r/parallel.type=ddp";
  ASSERT_EQ(status(member), "completed") << story("r");
  EXPECT_EQ(scalar(db(), "select world_size from runs where name = '" + member + "'"), "2");
  const std::vector<double> ranks = losses(member), single = losses("single");
  ASSERT_EQ(ranks.size(), 8u);
  ASSERT_EQ(single.size(), 8u);
  for (size_t i = 0; i < ranks.size(); ++i)
    EXPECT_NEAR(ranks[i], single[i], 1e-4) << "step " << i + 1;
}

// Paths Slurm must take whole (so the #SBATCH lines quote them): the sweep
// is submitted from a folder whose name holds a space, quotes and a '#', into a store whose
// path holds a space and a quote; its member runs there and completes. From a folder whose name
// holds a line break, which would start a line of the script, it is refused in one line.
TEST_F(SlurmSweep, WorkDirectoryAndStorePathsWithSpacesAndQuotesReachTheJob) {
  const std::string exp = experiment();
  const std::string work = dir_ / "work dir 'q' \"qq\" #1";
  const std::string store = dir_ / "my store's.db";
  std::filesystem::create_directories(work);
  const std::string log = dir_ / "submit.log";
  const pid_t submit = testing::start_kiln(
      {"sweep", exp, "--name", "odd", "--grid", "run.seed=1", "--set", "train.steps=4", "--set",
       "eval.every=0", "--db", store, "--launcher", "slurm"},
      log, {work, "", false});
  int status = 0;
  ::waitpid(submit, &status, 0);
  const std::string submitted = testing::read_file(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << submitted;
  const std::string job = job_of(submitted);
  ASSERT_TRUE(wait_for([&] { return job_gone(job); }, std::chrono::seconds(180))) << story("odd");
  EXPECT_EQ(testing::scalar(store, "select status from runs where name = 'odd/run.seed=1'"),
            "completed")
      << story("odd") << testing::read_file(dir_ / "runs/odd/slurm/sweep.sbatch");

  const std::string broken = dir_ / "line\nbreak";
  std::filesystem::create_directories(broken);
  const pid_t refused =
      testing::start_kiln({"sweep", exp, "--name", "nl", "--grid", "run.seed=1", "--set",
                           "train.steps=4", "--db", store, "--launcher", "slurm"},
                          log, {broken, "", false});
  ::waitpid(refused, &status, 0);
  const std::string said = testing::read_file(log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << said;
  EXPECT_NE(said.find("holds a line break"), std::string::npos) << said;
  EXPECT_EQ(testing::scalar(store, "select count(*) from sweeps where name = 'nl'"), "0");
}

TEST_F(SlurmSweep, AnUnknownPartitionAndANameSubmittedTwiceAreOneLineEach) {
  const std::string exp = experiment();
  const std::string small = " --grid run.seed=1 --set train.steps=2 --set eval.every=0";
  auto refused = run_kiln("sweep " + exp + " --name bad" + small +
                          " --launcher slurm "
                          "--partition nope");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  const std::string last = refused.output.substr(refused.output.rfind("kiln: error: "));
  EXPECT_EQ(std::count(last.begin(), last.end(), '\n'), 1) << refused.output;
  EXPECT_NE(last.find("invalid partition specified: nope"), std::string::npos) << last;
  auto unknown = run_kiln("sweep status bad --db " + db());
  testing::expect_one_error_line(unknown, "sweep status bad", "no sweep 'bad'");

  auto first = run_kiln("sweep " + exp + " --name twice" + small + " --launcher slurm");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto second = run_kiln("sweep " + exp + " --name twice" + small + " --launcher slurm");
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_NE(second.output.find("sweep 'twice' was already submitted"), std::string::npos)
      << second.output;
  EXPECT_EQ(std::count(second.output.begin(), second.output.end(), '\n'), 1) << second.output;
}

// An asha search under Slurm, TPE proposing after 3 random trials, its rungs scored by cooldown
// probes of a wsd schedule: two array tasks are its workers, which share the search and its
// proposals through the store (core/store/runs/sweep_claims.h) with no controller; `kiln sweep
// status` shows the ladder.
TEST_F(SlurmSweep, AnAshaSearchRunsAsTwoWorkerTasksThatShareTheLadder) {
  const std::string file = dir_ / "asha.toml";
  testing::write_text(
      file, "base = \"" + experiment("[schedule]\ntype = \"wsd\"\ndecay_fraction = 0.2\n") +
                "\"\nname = \"as\"\n[set]\ntrain.steps = 27\n[search]\n"
                "type = \"asha\"\nsampler = \"tpe\"\nstartup = 3\ntrials = 6\nseed = 2\n"
                "metric = \"val_loss\"\nmin_steps = 3\nrung_cooldown = 0.2\n[space]\n"
                "optimizer.lr = { log_uniform = [1e-4, 3e-1] }\n");
  auto submitted = run_kiln("sweep " + file + " --launcher slurm --max-parallel 2 --db " + db());
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  EXPECT_NE(submitted.output.find("2 workers of its search"), std::string::npos)
      << submitted.output;
  const std::string job = job_of(submitted.output);
  ASSERT_TRUE(wait_for([&] { return job_gone(job); }, std::chrono::seconds(240))) << story("as");
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'as'"), "6") << story("as");
  EXPECT_GE(std::stoi(scalar(db(),
                             "select count(*) from runs where sweep = 'as' and status = "
                             "'completed'")),
            1)
      << story("as");
  EXPECT_EQ(scalar(db(), "select count(distinct worker) from sweep_decisions where sweep = 'as'"),
            "2")
      << story("as");
  EXPECT_EQ(scalar(db(), "select count(*) from sweep_claims"), "0");
  EXPECT_EQ(scalar(db(), "select count(*) from sweep_proposals where sweep = 'as'"), "3");
  // Every member was scored at step 3 by a probe of 1 step (0.2 of 3, at least 1).
  EXPECT_EQ(scalar(db(),
                   "select count(*) from rung_probes p join runs r on r.id = p.run_id where "
                   "r.sweep = 'as' and p.step = 3 and p.cooldown_steps = 1"),
            "6")
      << story("as");
  auto shown = run_kiln("sweep status as --db " + db());
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_NE(shown.output.find("rung 1 of 3: step 3, 6 member(s), the best 2 go on"),
            std::string::npos)
      << shown.output;
}

// Schedule-free AdamW's asha search under Slurm: its rungs scored by the averaged iterate's own
// val loss, no probe, as two worker tasks.
TEST_F(SlurmSweep, AScheduleFreeAshaSearchRunsAsTwoWorkerTasks) {
  std::string base = testing::read_file(experiment("[schedule]\ntype = \"constant\"\n"));
  base.replace(base.find("[optimizer]\n"), 12, "[optimizer]\ntype = \"schedule_free_adamw\"\n");
  testing::write_text(dir_ / "free.toml", base);
  const std::string file = dir_ / "free_sweep.toml";
  testing::write_text(file, "base = \"" + (dir_ / "free.toml") +
                                "\"\nname = \"sf\"\n[set]\ntrain.steps = 27\n[search]\n"
                                "type = \"asha\"\ntrials = 4\nseed = 2\nmetric = \"val_loss\"\n"
                                "min_steps = 3\n[space]\n"
                                "optimizer.lr = { log_uniform = [1e-4, 3e-2] }\n");
  auto submitted = run_kiln("sweep " + file + " --launcher slurm --max-parallel 2 --db " + db());
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string job = job_of(submitted.output);
  ASSERT_TRUE(wait_for([&] { return job_gone(job); }, std::chrono::seconds(240))) << story("sf");
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'sf'"), "4") << story("sf");
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'sf' and status = 'completed'"),
            "1")
      << story("sf");
  EXPECT_EQ(scalar(db(), "select count(*) from rung_probes"), "0");
  EXPECT_EQ(scalar(db(), "select count(*) from sweep_claims"), "0");
}

}  // namespace
}  // namespace kiln
