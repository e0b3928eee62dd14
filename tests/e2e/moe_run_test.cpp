// A tiny llama whose blocks are mixtures of experts, through the real binary: it trains (the loss
// falls), a killed run resumes to the uninterrupted run's losses and layer measures bit for bit,
// the router losses enter the recorded loss with their weight, and the measures are metrics the
// store's readers know (docs/moe.md).
#include <sstream>

#include "ranks.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;

class MoeRun : public testing::TinyRun {
 protected:
  // Both router losses, and a capacity that drops some tokens.
  std::string moe_experiment() {
    return TinyRun::moe_experiment(
        "moe_aux_loss_weight = 0.01\nmoe_z_loss_weight = 0.001\nmoe_capacity_factor = 1.25\n",
        "steps = 24\nmicro_batch = 4\nseq_len = 32\nbatch_tokens = 256\n",
        "every = 12\nsteps = 2\n");
  }
};

TEST_F(MoeRun, TrainsResumesExactlyAndStoresItsLayerMeasures) {
  const std::string exp = moe_experiment();
  auto ref = run_kiln("run " + exp + " --name ref --set checkpoint.every=4");
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const auto curve = losses("ref");
  ASSERT_EQ(curve.size(), 24u);
  EXPECT_LT(curve.back(), curve.front() - 0.5) << curve.front() << " -> " << curve.back();

  // Killed right after its second snapshot (step 8), resumed: the same 24 losses and the same
  // measures, bit for bit.
  const std::string log = dir_ / "victim.log";
  auto killed = testing::run_child({"run", exp, "--name", "victim", "--set", "checkpoint.every=4"},
                                   log, "snapshot.published:2");
  ASSERT_TRUE(killed.killed) << testing::read_file(log);
  auto resumed = run_kiln("resume victim --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming after step 8"), std::string::npos) << resumed.output;
  EXPECT_EQ(losses("victim"), curve);

  // 24 steps x 2 blocks x 4 measures, each finite; the victim's equal the reference's.
  const auto measures = layer_measures("ref");
  ASSERT_EQ(measures.size(), 24u * 2 * 4);
  EXPECT_EQ(layer_measures("victim"), measures);
  for (const double imbalance : layer_measures("ref", "layer_metrics.name like '%imbalance'"))
    EXPECT_GE(imbalance, 1.0);
  for (const double dropped :
       layer_measures("ref", "layer_metrics.name like '%dropped_fraction'")) {
    EXPECT_GE(dropped, 0.0);
    EXPECT_LT(dropped, 0.5);
  }

  // The store's readers know them as metrics.
  auto shown = run_kiln("runs show ref --db " + db());
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_NE(shown.output.find("moe_1.load_imbalance"), std::string::npos) << shown.output;
  auto listed = run_kiln("runs list --db " + db() + " --where 'max(moe_0.load_imbalance) >= 1'");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("victim"), std::string::npos) << listed.output;
  auto none = run_kiln("runs list --db " + db() + " --where 'min(moe_0.load_imbalance) < 1'");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_EQ(none.output.find("victim"), std::string::npos) << none.output;
}

// The first step's recorded loss is the cross-entropy plus each block's weighted router losses:
// its loss with the weights 0.01 and 0.001 less its loss with both 0 is 0.01 x the blocks'
// load-balancing losses plus 0.001 x their z-losses, as the store recorded them.
TEST_F(MoeRun, RouterLossesEnterTheLossWithTheirWeights) {
  const std::string exp = moe_experiment();
  const std::string one = " --set train.steps=1 --set eval.every=0 --set checkpoint.every=0";
  auto weighted = run_kiln("run " + exp + " --name weighted" + one);
  ASSERT_EQ(weighted.exit_code, 0) << weighted.output;
  auto plain = run_kiln("run " + exp + " --name plain" + one +
                        " --set model.moe_aux_loss_weight=0 --set model.moe_z_loss_weight=0");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto aux = layer_measures("weighted", "layer_metrics.name like '%.aux_loss'");
  const auto z = layer_measures("weighted", "layer_metrics.name like '%.z_loss'");
  ASSERT_EQ(aux.size(), 2u);
  ASSERT_EQ(z.size(), 2u);
  const double expected = 0.01 * (aux[0] + aux[1]) + 0.001 * (z[0] + z[1]);
  EXPECT_GT(expected, 0.01);
  EXPECT_NEAR(losses("weighted")[0] - losses("plain")[0], expected, 1e-5);
}

// Two data-parallel ranks record the measures of the whole global batch, as one process taking
// the same 256 tokens in two micro-steps does: the ranks' expert counts are added before the
// imbalance and dropped fraction are taken (equal, being counts), and the router losses are the
// mean over all four micro-batches (equal to float rounding).
TEST_F(MoeRun, TwoRanksRecordTheMeasuresOfTheWholeBatch) {
  const std::string exp = moe_experiment();
  const std::string same = " --set train.steps=3 --set eval.every=0 --set checkpoint.every=0";
  auto single = run_kiln("run " + exp + " --name one" + same);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  auto codes = testing::run_ranks(2, "run " + exp + " --name two --set parallel.type=ddp" + same);
  ASSERT_EQ(codes, (std::vector<int>{0, 0}));
  // runs compare reads them as any metric: each group's mean is its one run's value.
  auto compared = run_kiln(
      "runs compare one two --group-by parallel.type --metric "
      "moe_1.load_imbalance@step=3 --db " +
      db());
  ASSERT_EQ(compared.exit_code, 0) << compared.output;
  const double at_3 = layer_measures("one",
                                     "step = 3 and layer_metrics.name = "
                                     "'moe_1.load_imbalance'")
                          .at(0);
  EXPECT_NE(compared.output.find("moe_1.load_imbalance@step=3"), std::string::npos)
      << compared.output;
  const std::string section =
      compared.output.substr(compared.output.find("moe_1.load_imbalance@step=3 ("));
  size_t shown = 0;
  for (size_t at = section.find(fmt::format(" {:.6f} ", at_3)); at != std::string::npos;
       at = section.find(fmt::format(" {:.6f} ", at_3), at + 1))
    ++shown;
  EXPECT_EQ(shown, 2u) << compared.output;  // both groups' means, one run each
  for (const char* name : {"load_imbalance", "dropped_fraction", "aux_loss", "z_loss"}) {
    const std::string where = fmt::format("layer_metrics.name like '%.{}'", name);
    const auto one = layer_measures("one", where), two = layer_measures("two", where);
    ASSERT_EQ(one.size(), 3u * 2) << name;
    ASSERT_EQ(two.size(), one.size()) << name;
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_NEAR(two[i], one[i], 1e-6) << name << " row " << i;
  }
}

// kiln bench prints the parameters beside those a token uses, and records both: per block
// q, k, v, o (4 x 32 x 32), two norms (2 x 32), the router (4 x 32) and 4 experts of
// 3 x 32 x 32, of which a token uses 2; then the embedding and untied head (2 x 64 x 32) and the
// final norm (32).
TEST_F(MoeRun, BenchPrintsAndRecordsTotalAgainstActiveParameters) {
  const double total = 2 * (4096 + 64 + 128 + 4 * 3072) + 2 * 64 * 32 + 32;
  const double active = total - 2 * 2 * 3072;
  auto bench = run_kiln("bench " + moe_experiment() + " --steps 1 --warmup 0 --record moe");
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  EXPECT_NE(bench.output.find(fmt::format("{:.2f}M parameters, {:.2f}M active per token",
                                          total / 1e6, active / 1e6)),
            std::string::npos)
      << bench.output;
  EXPECT_EQ(testing::query_doubles(db(), "select parameters from bench_results"),
            std::vector<double>{total});
  EXPECT_EQ(testing::query_doubles(db(), "select active_parameters from bench_results"),
            std::vector<double>{active});
}

}  // namespace
}  // namespace kiln
