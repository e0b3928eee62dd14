// The shipped mixture-of-experts example, experiments/moe_kjv.toml, trains on the KJV GPT-2 shards
// that tools/setup.sh prepares (as its header says), run from the source tree as a user runs it:
// a few steps, its loss falling, and every block's load measures in the store.
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using MoeExample = testing::TinyRun;

TEST_F(MoeExample, TheShippedExampleTrainsOnTheKjvShards) {
  const std::string sets = fmt::format(
      " --set run.db={} --set run.out_dir={} --set train.steps=8 --set schedule.warmup=2 --set "
      "eval.every=8 "
      "--set eval.steps=2 --set checkpoint.every=0",
      db(), dir_ / "runs");
  auto run = run_kiln("run experiments/moe_kjv.toml --name moe" + sets, KILN_SOURCE_DIR);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto curve = losses("moe");
  ASSERT_EQ(curve.size(), 8u);
  EXPECT_LT(curve.back(), curve.front() - 0.3) << curve.front() << " -> " << curve.back();
  // 8 steps x 4 blocks, each a mixture of 8 experts whose fullest takes at most all 2 x 512 / 8.
  const auto imbalances = testing::query_doubles(
      db(), "select value from layer_metrics where name like 'moe_%.load_imbalance'");
  ASSERT_EQ(imbalances.size(), 8u * 4);
  for (const double imbalance : imbalances) {
    EXPECT_GE(imbalance, 1.0);
    EXPECT_LE(imbalance, 8.0);
  }
}

}  // namespace
}  // namespace kiln
