// Dropout that every parallel strategy draws as one process does (core/layers/random_draws.h): with
// model.dropout = 0.1, each strategy's 20-step loss curve is the single process's within 1e-4,
// and so is a run whose world size changes at a resume, in either direction. With dropout drawn
// from each rank's generator (LibTorch's), tensor-parallel ranks drew correlated masks and data
// ranks masks no single process draws, so none of these held.
#include "ranks.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::run_ranks;
using DropoutParity = testing::TinyRun;

// Four micro-batches of 4 x 32 tokens per step: grad_accum 4 on one process, 2 on each of two
// data ranks; a pipeline's four micro-batches.
const std::string kDropoutRunSets =
    " --set model.dropout=0.1 --set train.micro_batch=4 --set train.batch_tokens=512 "
    "--set eval.every=0";

TEST_F(DropoutParity, EveryStrategyFollowsTheSingleProcessCurve) {
  const std::string exp = experiment();
  auto one = run_kiln("run " + exp + " --name one --set train.steps=20 --set checkpoint.every=0" +
                      kDropoutRunSets);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  struct Strategy {
    std::string name;
    int world;
    std::string settings;
  };
  const std::vector<Strategy> strategies = {
      {"ddp", 2, "--set parallel.type=ddp"},
      {"zero1", 2, "--set parallel.type=zero --set parallel.stage=1"},
      {"zero2", 2, "--set parallel.type=zero --set parallel.stage=2"},
      {"fsdp", 2, "--set parallel.type=fsdp"},
      {"tensor", 2, "--set parallel.type=tensor --set parallel.tp=2"},
      {"pipeline", 2,
       "--set parallel.type=pipeline --set parallel.pp=2 --set parallel.microbatches=4"},
      {"mesh", 4, "--set parallel.type=tensor --set parallel.tp=2 --set parallel.dp=2"},
  };
  for (const auto& [name, world, settings] : strategies) {
    SCOPED_TRACE(name);
    const std::string logs = dir_ / (name + "_rank");
    auto codes = run_ranks(world,
                           "run " + exp + " --name " + name + " " + settings +
                               " --set train.steps=20 --set checkpoint.every=0" + kDropoutRunSets,
                           logs);
    ASSERT_EQ(codes, std::vector<int>(world, 0)) << testing::read_file(logs + "0.log");
    expect_same_curve("one", name, 20);
  }
}

// Llama's heads under tensor parallelism, grouped queries and activation checkpointing: the
// recomputed blocks draw the masks of their first pass.
TEST_F(DropoutParity, LlamaUnderTensorParallelismFollowsTheSingleProcessCurve) {
  const std::string exp = experiment();
  const std::string llama =
      " --set model.type=llama --set model.n_head=4 --set model.n_kv_head=2 --set "
      "model.ffn_dim=64 --set train.steps=12 --set checkpoint.every=0" +
      kDropoutRunSets;
  auto one = run_kiln("run " + exp + " --name one" + llama);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string logs = dir_ / "t2_rank";
  auto codes = run_ranks(2,
                         "run " + exp +
                             " --name t2 --set parallel.type=tensor --set parallel.tp=2 "
                             "--set model.activation_checkpointing=full" +
                             llama,
                         logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
  expect_same_curve("one", "t2", 12);
}

TEST_F(DropoutParity, AResumeAtAnotherWorldSizeKeepsTheSingleProcessCurve) {
  const std::string exp = experiment();
  auto one = run_kiln("run " + exp + " --name one --set train.steps=20 --set checkpoint.every=0" +
                      kDropoutRunSets);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string ddp = " --set parallel.type=ddp";
  const std::string first_ten = " --set train.steps=10 --set checkpoint.every=10" + kDropoutRunSets;

  // Two ranks for 10 steps, then one process for 10.
  const std::string logs = dir_ / "down_rank";
  auto codes = run_ranks(2, "run " + exp + " --name down" + ddp + first_ten, logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
  auto down =
      run_kiln("resume down --db " + db() + " --set train.steps=20 --set parallel.type=single");
  ASSERT_EQ(down.exit_code, 0) << down.output;
  expect_same_curve("one", "down", 20);

  // One process for 10 steps, then two ranks for 10.
  auto up = run_kiln("run " + exp + " --name up" + first_ten);
  ASSERT_EQ(up.exit_code, 0) << up.output;
  codes = run_ranks(2, "resume up --db " + db() + " --set train.steps=20" + ddp, logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
  expect_same_curve("one", "up", 20);
}

}  // namespace
}  // namespace kiln
