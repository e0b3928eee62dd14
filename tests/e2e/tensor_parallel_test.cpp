// parallel "tensor" over Gloo ranks: tp 2 and a tp 2 x dp 2 mesh follow one process's loss
// curve (gpt and llama), snapshots resume at another mesh, world size or strategy, and shapes
// or meshes that do not fit are refused on every rank before any builds its model.
#include "ranks.h"
#include "snapshot_writers.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::run_ranks;
using TensorParallel = testing::TinyRun;
using TensorParallelResume = testing::EachSnapshotWriter<>;

KILN_EACH_SNAPSHOT_WRITER(TensorParallelResume);

// Two micro-steps of 4 x 32 tokens per step on one process and on a tp group (one replica);
// one micro-step per replica in the 2 x 2 mesh: the same 256 tokens per step everywhere.
const std::string kTensorParallelRunSets =
    " --set train.micro_batch=4 --set train.batch_tokens=256 --set eval.every=0";
const std::string kTp2 = " --set parallel.type=tensor --set parallel.tp=2";

TEST_P(TensorParallelResume, GptFollowsTheSingleProcessCurveAndResumesAcrossMeshes) {
  const std::string exp = experiment();
  auto one = run_kiln("run " + exp + " --name one --set train.steps=20 --set checkpoint.every=0" +
                      kTensorParallelRunSets);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string logs = dir_ / "rank";
  // tp 2 for 12 steps (blocks recomputed in backward, their all-reduces too), then one process
  // to 20.
  auto codes =
      run_ranks(2,
                "run " + exp + " --name t2 --set train.steps=12 --set checkpoint.every=6 " +
                    "--set model.activation_checkpointing=full" + kTp2 + kTensorParallelRunSets,
                logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
  auto back =
      run_kiln("resume t2 --db " + db() + " --set train.steps=20 --set parallel.type=single");
  ASSERT_EQ(back.exit_code, 0) << back.output;
  // A tp 2 x dp 2 mesh for 10 steps, then tp 2 alone (2 ranks) to 20.
  codes = run_ranks(4,
                    "run " + exp + " --name m4 --set train.steps=10 --set checkpoint.every=10" +
                        kTp2 + " --set parallel.dp=2" + kTensorParallelRunSets,
                    logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0, 0, 0})) << testing::read_file(logs + "0.log");
  EXPECT_NE(testing::read_file(logs + "0.log").find("x 1 micro-steps x 2 replica(s) of 2 ranks"),
            std::string::npos)
      << testing::read_file(logs + "0.log");
  codes =
      run_ranks(2, "resume m4 --db " + db() + " --set train.steps=20 --set parallel.dp=0", logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");

  for (const std::string run : {"t2", "m4"})
    expect_same_curve("one", run, 20);
  // eval, sample and export read the whole snapshot in one process, whatever trained it.
  auto eval = run_kiln("eval m4 --db " + db());
  EXPECT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find("step 20 | val loss"), std::string::npos) << eval.output;
}

TEST_F(TensorParallel, LlamaWithGroupedQueriesFollowsTheSingleProcessCurve) {
  const std::string exp = experiment();
  const std::string llama =
      " --set model.type=llama --set model.n_head=4 --set model.n_kv_head=2 "
      "--set model.ffn_dim=64 --set train.steps=12 --set checkpoint.every=0";
  auto one = run_kiln("run " + exp + " --name one" + llama + kTensorParallelRunSets);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string logs = dir_ / "rank";
  auto codes =
      run_ranks(2, "run " + exp + " --name t2" + llama + kTp2 + kTensorParallelRunSets, logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
  expect_same_curve("one", "t2", 12);
}

// Under bf16 autocast each rank's partial output of a row-parallel layer is rounded to bf16
// before the group sums it (in float32 on Gloo, which has no bf16 sum), where one process rounds
// the whole sum once: the curves agree to bf16's precision, not to 1e-4.
TEST_F(TensorParallel, UnderBf16AutocastFollowsTheCurveToBf16Precision) {
  const std::string exp = experiment();
  const std::string bf16 =
      " --set precision.type=bf16 --set train.steps=6 --set checkpoint.every=0" +
      kTensorParallelRunSets;
  auto one = run_kiln("run " + exp + " --name one" + bf16);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string logs = dir_ / "rank";
  auto codes = run_ranks(2, "run " + exp + " --name t2" + bf16 + kTp2, logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
  expect_same_curve("one", "t2", 6, 2e-2);
}

// Each refusal is one line on every rank, exit 2, and no run is recorded.
TEST_F(TensorParallel, ShapesAndMeshesThatDoNotFitAreRefusedOnEveryRank) {
  const std::string exp = experiment();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {kTp2 + " --set model.n_head=1 --set model.n_embd=32",
       "model.n_head = 1 does not divide over parallel.tp = 2"},
      {kTp2 + " --set parallel.dp=2", "parallel.dp = 2 x parallel.tp = 2 is a mesh of 4"},
      {" --set parallel.type=tensor --set parallel.tp=3", "parallel.tp = 3 does not divide"},
      {kTp2 + " --set optimizer.type=muon", "optimizer 'muon' orthogonalises"},
  };
  const std::string logs = dir_ / "rank";
  for (const auto& [settings, message] : cases) {
    SCOPED_TRACE(settings);
    auto codes = run_ranks(2, "run " + exp + " --name refused" + settings, logs);
    EXPECT_EQ(codes, (std::vector<int>{2, 2}));
    for (int rank = 0; rank < 2; ++rank) {
      const std::string log = testing::read_file(logs + std::to_string(rank) + ".log");
      EXPECT_NE(log.find(message), std::string::npos) << log;
      EXPECT_EQ(log.find("Traceback"), std::string::npos) << log;
    }
  }
  const std::string recorded = testing::scalar(db(), "select count(*) from runs");
  EXPECT_TRUE(recorded.empty() || recorded == "0") << recorded << " run(s) recorded";
}

}  // namespace
}  // namespace kiln
