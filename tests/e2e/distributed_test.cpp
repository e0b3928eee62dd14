// Data parallel over real c10d Gloo process groups: two kiln processes on this machine.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "ranks.h"
#include "snapshot_writers.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::run_ranks;
using Distributed = testing::TinyRun;
using DistributedSnapshots = testing::EachSnapshotWriter<>;

KILN_EACH_SNAPSHOT_WRITER(DistributedSnapshots);

// The same 512-token global batches: 2 micro-steps of 4 x 32 on one process, or one micro-step
// on each of two.
const std::string kSame =
    " --set train.steps=20 --set train.micro_batch=4 --set train.batch_tokens=256 "
    "--set eval.every=10 --set checkpoint.every=0";

TEST_F(Distributed, TwoGlooRanksFollowTheSingleProcessCurve) {
  const std::string exp = experiment();
  auto single = run_kiln("run " + exp + " --name ws1" + kSame);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  auto codes = run_ranks(2, "run " + exp + " --name ws2 --set parallel.type=ddp" + kSame);
  ASSERT_EQ(codes, (std::vector<int>{0, 0}));
  auto a = losses("ws1"), b = losses("ws2");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]));
  EXPECT_LT(worst, 1e-4);
  EXPECT_LT(b.back(), b.front() - 1.0);
  EXPECT_EQ(testing::scalar(db(), "select world_size from runs where name = 'ws2'"), "2");
  // Only rank 0 writes: one row per step, the val evals once each.
  EXPECT_EQ(testing::scalar(db(),
                            "select count(*) from evals e join runs r on r.id = e.run_id "
                            "where r.name = 'ws2' and split = 'val'"),
            "2");
}

// Two nodes without Slurm, as a user types them on two hosts: `kiln launch --nnodes 2
// --node-rank 0|1 --master-addr HOST0 --master-port P`, here both on this machine over loopback.
// The two launchers' ranks meet at node 0's store and follow the single process.
TEST_F(Distributed, TwoLaunchersAsTwoNodesFollowTheSingleProcessCurve) {
  const std::string exp = experiment();
  ASSERT_EQ(run_kiln("run " + exp + " --name one" + kSame).exit_code, 0);
  const int port = testing::free_local_port();
  std::vector<pid_t> nodes;
  for (int node = 0; node < 2; ++node) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const std::string command = fmt::format(
          "'{}' launch --nnodes 2 --node-rank {} --nproc-per-node 1 --master-addr 127.0.0.1 "
          "--master-port {} -- run {} --name nodes --set parallel.type=ddp {} > '{}' 2>&1",
          KILN_BINARY, node, port, exp, kSame, dir_ / fmt::format("node{}.log", node));
      ::execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
      ::_exit(127);
    }
    nodes.push_back(pid);
  }
  for (int node = 0; node < 2; ++node) {
    int status = 0;
    ASSERT_EQ(::waitpid(nodes[node], &status, 0), nodes[node]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << testing::read_file(dir_ / fmt::format("node{}.log", node));
  }
  EXPECT_EQ(testing::scalar(db(), "select world_size from runs where name = 'nodes'"), "2");
  expect_same_curve("one", "nodes", 20);
}

TEST_F(Distributed, LaunchRestartsAllRanksWhenOneIsKilledAndTheCurveIsUnchanged) {
  const std::string exp = experiment();
  const std::string same =
      " --set train.steps=200 --set train.micro_batch=4 "
      "--set train.batch_tokens=256 --set eval.every=0 "
      "--set checkpoint.every=10";
  ASSERT_EQ(run_kiln("run " + exp + " --name ref" + same).exit_code, 0);
  const std::string log = dir_ / "launch.log";
  const int port = testing::free_local_port();
  pid_t launcher = ::fork();
  if (launcher == 0) {
    const std::string command = fmt::format(
        "'{}' launch --nproc-per-node 2 --master-port {} --max-restarts 1 -- run {} --name l2 "
        "--set parallel.type=ddp {} > '{}' 2>&1",
        KILN_BINARY, port, exp, same, log);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
    ::_exit(127);
  }
  // Once rank 0 has recorded 30 steps (a snapshot at 10 lies behind them), SIGKILL rank 1.
  // Waited for by what the log and the store say, not by a time: a loaded machine may take
  // minutes to start two LibTorch ranks.
  pid_t victim = 0;
  const bool started = testing::wait_for(
      [&] {
        const std::string output = testing::read_file(log);
        const std::string marker = "attempt 0: rank 1 is pid ";
        const auto at = output.find(marker);
        if (at != std::string::npos) victim = std::stoi(output.substr(at + marker.size()));
        return victim > 0;
      },
      std::chrono::seconds(300));
  ASSERT_TRUE(started) << testing::read_file(log);
  const bool stepped = testing::wait_for(
      [&] {
        const std::string steps = testing::scalar(db(),
                                                  "select count(*) from metrics m join runs r "
                                                  "on r.id = m.run_id where r.name = 'l2'");
        return !steps.empty() && std::stoi(steps) >= 30;
      },
      std::chrono::seconds(600));
  if (!stepped) ::kill(launcher, SIGTERM);
  ASSERT_TRUE(stepped) << testing::read_file(log);
  ::kill(victim, SIGKILL);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_NE(output.find("launch: restarting every rank (1 of 1 restarts)"), std::string::npos)
      << output;
  EXPECT_NE(output.find("[rank 0] resuming after step"), std::string::npos) << output;
  expect_same_curve("ref", "l2", 200);
}

// A rank that stops (SIGSTOP: a hung process, a frozen machine) makes the other stop within
// parallel.timeout_s with one line naming it and where it ran, instead of waiting for good;
// the run, marked interrupted, resumes to the end from its latest snapshot.
TEST_F(Distributed, AStoppedRankMakesTheOthersStopWithALineNamingIt) {
  const std::string exp = experiment();
  const std::string same =
      " --set train.steps=200 --set train.micro_batch=4 --set train.batch_tokens=256 "
      "--set eval.every=0 --set checkpoint.every=10 --set parallel.timeout_s=5";
  const std::string log = dir_ / "launch.log";
  const int port = testing::free_local_port();
  const pid_t launcher = ::fork();
  if (launcher == 0) {
    const std::string command = fmt::format(
        "'{}' launch --nproc-per-node 2 --master-port {} -- run {} --name hung "
        "--set parallel.type=ddp {} > '{}' 2>&1",
        KILN_BINARY, port, exp, same, log);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
    ::_exit(127);
  }
  pid_t stopped = 0;
  ASSERT_TRUE(testing::wait_for(
      [&] {
        const std::string output = testing::read_file(log);
        const std::string marker = "attempt 0: rank 1 is pid ";
        const auto at = output.find(marker);
        if (at != std::string::npos) stopped = std::stoi(output.substr(at + marker.size()));
        const std::string steps = testing::scalar(
            db(),
            "select count(*) from metrics m join runs r on r.id = m.run_id where r.name = "
            "'hung'");
        return stopped > 0 && !steps.empty() && std::stoi(steps) >= 30;
      },
      std::chrono::seconds(600)))
      << testing::read_file(log);
  ::kill(stopped, SIGSTOP);
  const auto at = std::chrono::steady_clock::now();
  int status = 0;
  ASSERT_TRUE(testing::wait_for([&] { return ::waitpid(launcher, &status, WNOHANG) == launcher; },
                                std::chrono::seconds(120)))
      << testing::read_file(log);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - at).count();
  ::kill(stopped, SIGKILL);  // the launcher's SIGTERM waits on a stopped process
  const std::string output = testing::read_file(log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << output;
  EXPECT_NE(output.find(
                fmt::format("[rank 0] kiln: error: rank 0 of 2: rank 1 (pid {} on host ", stopped)),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("stopped answering within parallel.timeout_s = 5 s"), std::string::npos)
      << output;
  // The timeout, the roll call (5 s), the launcher's 20 s grace before it SIGKILLs the stopped
  // rank, and room for a busy machine: a hang would wait for good.
  EXPECT_LT(waited, 5 + 5 + 20 + 30) << "the timeout, the roll call and the launcher's stop";
  // Stopped from outside, as a killed job is: interrupted, the line kept as its error.
  EXPECT_EQ(testing::scalar(db(), "select status from runs where name = 'hung'"), "interrupted");
  EXPECT_NE(testing::scalar(db(), "select error from runs where name = 'hung'")
                .find("stopped answering within parallel.timeout_s = 5 s"),
            std::string::npos);
  auto resumed = run_kiln("resume hung --db " + db() + " --set parallel.type=single");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(testing::scalar(db(),
                            "select max(m.step) from metrics m join runs r on r.id = "
                            "m.run_id where r.name = 'hung'"),
            "200");
}

// Rank 0 alone writes a snapshot, from the parts every rank sends it. Rank 1 killed as it is
// about to send its part of step 8's (an fsdp shard, its RNG states and data position): rank 0
// stops at the gather with a line naming rank 1, no snapshot of step 8 exists anywhere, and the
// run resumed in one process from step 4's follows the uninterrupted single process's curve,
// with every step's row stored once.
TEST_F(Distributed, ARankKilledSendingItsSnapshotPartLeavesThePreviousSnapshotToResume) {
  const std::string exp = experiment();
  const std::string same =
      " --set model.dropout=0.1 --set train.micro_batch=4 --set train.batch_tokens=512 "
      "--set eval.every=0 --set checkpoint.every=4";
  auto ref = run_kiln("run " + exp + " --name ref --set train.steps=12" + same);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  testing::RankExits exits;
  {
    testing::ScopedEnv fault("KILN_FAULT", "snapshot.sending:2");  // rank 1's second snapshot
    exits = run_ranks(2, "run " + exp +
                             " --name cut --set parallel.type=fsdp --set parallel.timeout_s=10 "
                             "--set train.steps=12" +
                             same);
  }
  const std::string why = ::testing::PrintToString(exits);
  ASSERT_EQ(exits.codes.size(), 2u);
  EXPECT_EQ(exits.codes[1], 128 + SIGKILL) << why;
  EXPECT_NE(exits.codes[0], 0) << why;
  EXPECT_NE(exits.logs[0].find("kiln: error: rank 0 of 2: rank 1 (pid "), std::string::npos) << why;
  const auto snapshots = testing::query(
      db(), "select s.label from snapshots s join runs r on r.id = s.run_id where r.name = 'cut'");
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots[0][0], "step_000004");
  const std::string folder = folder_of("cut");
  for (const auto& entry : std::filesystem::directory_iterator(folder + "/snapshots")) {
    EXPECT_EQ(entry.path().filename().string().find("000008"), std::string::npos) << entry.path();
  }
  auto resumed = run_kiln("resume cut --db " + db() + " --set parallel.type=single");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_curve("ref", "cut", 12);
  EXPECT_EQ(testing::scalar(db(),
                            "select count(distinct m.step) || ' ' || count(*) from metrics m join "
                            "runs r on r.id = m.run_id where r.name = 'cut'"),
            "12 12");
}

TEST_P(DistributedSnapshots, ASnapshotTakenOnTwoRanksResumesOnOne) {
  const std::string exp = experiment();
  const std::string same =
      " --set train.micro_batch=4 --set train.batch_tokens=256 "
      "--set eval.every=0 --set checkpoint.every=10";
  ASSERT_EQ(run_kiln("run " + exp + " --name ref --set train.steps=40" + same).exit_code, 0);
  auto codes =
      run_ranks(2, "run " + exp + " --name w --set parallel.type=ddp --set train.steps=20" + same);
  ASSERT_EQ(codes, (std::vector<int>{0, 0}));
  // The same run, continued by a single process: 2 micro-steps now make the same global batch.
  auto resumed = run_kiln("resume w --set train.steps=40 --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("x 2 micro-steps x 1 rank(s)"), std::string::npos)
      << resumed.output;
  // The store says where it ran last, and the resume says what changed: the same 256 tokens
  // (micro_batch 4 x seq_len 32 x 2 ranks), as 2 micro-steps of 4 sequences on one.
  EXPECT_EQ(testing::query(db(),
                           "SELECT world_size, changes FROM runs JOIN resumes r ON "
                           "runs.id = r.run_id WHERE runs.name = 'w'"),
            (std::vector<std::vector<std::string>>{
                {"1",
                 "train.steps: 20 -> 40; world size 2 -> 1: global batch kept at 256 tokens, "
                 "each rank now 2 micro-step(s) of 4 sequences (was 1)"}}));
  EXPECT_NE(resumed.output.find("resume changes world size 2 -> 1: global batch kept at 256"),
            std::string::npos)
      << resumed.output;
  expect_same_curve("ref", "w", 40);
}

double worst_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

TEST_F(Distributed, ZeroStagesFollowTheSingleProcessCurveAndShardTheOptimizerState) {
  const std::string exp = experiment();
  const std::string same =
      " --set train.micro_batch=4 --set train.batch_tokens=256 --set eval.every=0 "
      "--set checkpoint.every=10";
  auto single = run_kiln("run " + exp + " --name ref --set train.steps=40" + same);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto whole = testing::optimizer_state_mib(single.output);
  ASSERT_EQ(whole.size(), 1u) << single.output;
  auto ref = losses("ref");
  ASSERT_EQ(ref.size(), 40u);
  for (int stage : {1, 2}) {
    SCOPED_TRACE(fmt::format("stage {}", stage));
    const std::string name = fmt::format("z{}", stage);
    const std::string logs = dir_ / (name + "_rank");
    auto codes = run_ranks(2,
                           fmt::format("run {} --name {} --set parallel.type=zero "
                                       "--set parallel.stage={} --set train.steps=20{}",
                                       exp, name, stage, same),
                           logs);
    ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
    auto curve = losses(name);
    ASSERT_EQ(curve.size(), 20u);
    EXPECT_LT(worst_difference(ref, curve), 1e-4);
    // Each rank holds about half of what one process holds.
    const auto sharded = testing::optimizer_state_mib(testing::read_file(logs + "0.log"));
    ASSERT_EQ(sharded.size(), 2u);
    for (double mib : sharded)
      EXPECT_LT(mib, 0.6 * whole[0]);
    EXPECT_NEAR(sharded[0] + sharded[1], whole[0], 0.1 * whole[0]);
  }
  // The snapshot holds the whole optimizer state: one process continues the stage-2 run.
  auto resumed = run_kiln("resume z2 --set train.steps=40 --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  auto curve = losses("z2");
  ASSERT_EQ(curve.size(), 40u);
  EXPECT_LT(worst_difference(ref, curve), 1e-4);
}

TEST_P(DistributedSnapshots, ASnapshotTakenOnOneRankResumesOnTwo) {
  const std::string exp = experiment();
  const std::string same =
      " --set train.micro_batch=4 --set train.batch_tokens=256 "
      "--set eval.every=0 --set checkpoint.every=10 --set parallel.type=ddp";
  ASSERT_EQ(run_kiln("run " + exp + " --name ref --set train.steps=40" + same).exit_code, 0);
  auto first = run_kiln("run " + exp + " --name w --set train.steps=20" + same);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string logs = dir_ / "w_rank";
  auto codes = run_ranks(2, "resume w --set train.steps=40 --db " + db(), logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0}))
      << testing::read_file(logs + "0.log") << testing::read_file(logs + "1.log");
  const std::string output = testing::read_file(logs + "0.log");
  EXPECT_NE(output.find("x 1 micro-steps x 2 rank(s)"), std::string::npos) << output;
  expect_same_curve("ref", "w", 40);
  // Steps taken by two ranks record how far apart they were.
  EXPECT_EQ(testing::scalar(db(),
                            "select count(rank_skew_ms) from metrics m join runs r on r.id = "
                            "m.run_id where r.name = 'w' and step > 20"),
            "20");
}

// "live micro-batches 4 | 4" -> 4: the most any stage held in the last logged step.
int64_t most_live_micro_batches(const std::string& output) {
  const std::string marker = "live micro-batches ";
  auto at = output.rfind(marker);
  if (at == std::string::npos) return -1;
  const size_t from = at + marker.size();
  std::istringstream in(output.substr(from, output.find('\n', from) - from));
  int64_t most = -1;
  for (std::string item; std::getline(in, item, '|');)
    most = std::max<int64_t>(most, std::stoll(item));
  return most;
}

// The same 512-token global batches as 4 micro-batches of 4 x 32 on one process.
const std::string kPipelineBatch =
    " --set train.micro_batch=4 --set train.batch_tokens=512 --set eval.every=10 "
    "--set checkpoint.every=10";

TEST_F(Distributed, TwoPipelineStagesFollowTheSingleProcessCurveAndOneFOneBHoldsLess) {
  const std::string exp = experiment();
  auto single = run_kiln("run " + exp + " --name ref --set train.steps=40" + kPipelineBatch);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  auto ref = losses("ref");
  std::map<std::string, int64_t> live;
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    SCOPED_TRACE(schedule);
    const std::string logs = dir_ / (schedule + "_rank");
    auto codes = run_ranks(2,
                           fmt::format("run {} --name {} --set train.steps=20 --set "
                                       "parallel.type=pipeline --set parallel.pp=2 --set "
                                       "parallel.microbatches=4 --set parallel.schedule={}{}",
                                       exp, schedule, schedule, kPipelineBatch),
                           logs);
    const std::string output = testing::read_file(logs + "0.log");
    ASSERT_EQ(codes, (std::vector<int>{0, 0})) << output << testing::read_file(logs + "1.log");
    auto curve = losses(schedule);
    ASSERT_EQ(curve.size(), 20u);
    EXPECT_LT(worst_difference(ref, curve), 1e-4);
    EXPECT_NE(output.find("  pipeline: stage compute "), std::string::npos) << output;
    live[schedule] = most_live_micro_batches(output);
    EXPECT_EQ(testing::scalar(db(),
                              "select count(bubble) from metrics m join runs r on r.id = "
                              "m.run_id where r.name = '" +
                                  schedule + "'"),
              "20");
  }
  EXPECT_EQ(live["gpipe"], 4);  // every micro-batch of the step
  EXPECT_EQ(live["1f1b"], 2);   // pp - stage on the first stage
  // The snapshot is whole: one process continues the pipelined run.
  auto resumed =
      run_kiln("resume 1f1b --set train.steps=40 --set parallel.type=single --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  auto curve = losses("1f1b");
  ASSERT_EQ(curve.size(), 40u);
  EXPECT_LT(worst_difference(ref, curve), 1e-4);
}

TEST_F(Distributed, ATwoByTwoMeshOfStagesAndReplicasFollowsTheSingleProcessCurve) {
  const std::string exp = experiment();
  auto single = run_kiln("run " + exp + " --name ref --set train.steps=20" + kPipelineBatch);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const std::string logs = dir_ / "mesh_rank";
  auto codes = run_ranks(4,
                         "run " + exp +
                             " --name mesh --set train.steps=20 --set parallel.type=pipeline "
                             "--set parallel.pp=2 --set parallel.dp=2 --set "
                             "parallel.microbatches=2" +
                             kPipelineBatch,
                         logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0, 0, 0})) << testing::read_file(logs + "0.log");
  auto ref = losses("ref"), curve = losses("mesh");
  ASSERT_EQ(curve.size(), 20u);
  EXPECT_LT(worst_difference(ref, curve), 1e-4);
  EXPECT_EQ(testing::scalar(db(), "select world_size from runs where name = 'mesh'"), "4");
}

TEST_F(Distributed, TheTransformerLmSplitsIntoStagesToo) {
  const std::string exp = dir_ / "tlm.toml";
  testing::write_text(exp, fmt::format(R"([run]
db = "{}"
out_dir = "{}"
threads = 1
[model]
type = "transformer_lm"
vocab_size = 64
d_model = 32
nhead = 2
num_layers = 3
dim_feedforward = 32
max_len = 32
dropout = 0.0
[data]
train = "{}/train_*.bin"
val = "{}/val_*.bin"
[train]
seq_len = 32
[optimizer]
type = "sgd"
lr = 0.5
)",
                                       db(), dir_ / "runs", dir_ / "data", dir_ / "data"));
  const std::string same = " --set train.steps=15" + kPipelineBatch;
  ASSERT_EQ(run_kiln("run " + exp + " --name tref" + same).exit_code, 0);
  const std::string logs = dir_ / "tlm_rank";
  auto codes = run_ranks(2,
                         "run " + exp +
                             " --name tpipe --set parallel.type=pipeline --set parallel.pp=2 "
                             "--set parallel.microbatches=4 --set 'parallel.split_points=\"2\"'" +
                             same,
                         logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
  auto ref = losses("tref"), curve = losses("tpipe");
  ASSERT_EQ(curve.size(), 15u);
  EXPECT_LT(worst_difference(ref, curve), 1e-4);
}

TEST_F(Distributed, AnIncompleteEnvironmentIsAClearError) {
  const std::string exp = experiment();
  auto result = run_kiln("run " + exp + " --name e --set parallel.type=ddp");  // no RANK at all
  EXPECT_EQ(result.exit_code, 0) << result.output;                             // a world of one
  ::setenv("RANK", "0", 1);
  auto partial = run_kiln("run " + exp + " --name p --set parallel.type=ddp");
  ::unsetenv("RANK");
  EXPECT_EQ(partial.exit_code, 2);
  EXPECT_NE(partial.output.find("RANK is set but WORLD_SIZE is not"), std::string::npos)
      << partial.output;
}

// parallel.backend = "nccl" on ranks without a GPU: every rank says so in one line and none
// builds its model (no step line); "auto" on the same ranks is Gloo and trains.
TEST_F(Distributed, NcclOnRanksWithoutAGpuIsRefusedBeforeAnyModelAndAutoIsGloo) {
  const int port = testing::free_local_port();
  auto refused = run_kiln(fmt::format(
      "launch --nproc-per-node 2 --master-port {} -- run {} --name nccl --set run.device=auto "
      "--set parallel.type=ddp --set parallel.backend=nccl",
      port, experiment()));
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_NE(refused.output.find("parallel.backend = \"nccl\" needs every rank on a CUDA device, "
                                "but rank 0 trains on the CPU"),
            std::string::npos)
      << refused.output;
  EXPECT_EQ(refused.output.find("| lr "), std::string::npos) << refused.output;
  auto gloo = run_kiln(fmt::format(
      "launch --nproc-per-node 2 --master-port {} -- run {} --name auto --set run.device=auto "
      "--set parallel.type=ddp --set train.steps=3 --set eval.every=0",
      port + 1, experiment()));
  ASSERT_EQ(gloo.exit_code, 0) << gloo.output;
  EXPECT_NE(gloo.output.find("run.device = auto: this Kiln"), std::string::npos) << gloo.output;
}

}  // namespace
}  // namespace kiln
