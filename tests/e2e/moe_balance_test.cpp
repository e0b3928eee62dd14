// DeepSeek-V3's auxiliary-loss-free balancing through the real binary (docs/moe.md): with the
// routing bias moving after each step, a tiny mixture of experts trained without any router loss
// spreads its tokens more evenly than the same run without it, and a run killed after a snapshot
// resumes to the uninterrupted run's losses and loads bit for bit (the bias is in the snapshot).
#include <iostream>
#include <numeric>

#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;

class MoeBalance : public testing::TinyRun {
 protected:
  // No router losses and no capacity: only the bias balances.
  std::string balanced_experiment() {
    return moe_experiment("moe_aux_loss_weight = 0\nmoe_bias_update_rate = 0.01\n",
                          "steps = 24\nmicro_batch = 4\nseq_len = 32\nbatch_tokens = 256\n",
                          "every = 0\n");
  }

  std::vector<double> imbalances(const std::string& run, int from_step) {
    return layer_measures(
        run, fmt::format("layer_metrics.name like '%.load_imbalance' and step >= {}", from_step));
  }

  static double mean(const std::vector<double>& values) {
    return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  }
};

TEST_F(MoeBalance, TheBiasEvensTheLoadsAndResumesExactly) {
  const std::string exp = balanced_experiment();
  auto balanced = run_kiln("run " + exp + " --name balanced --set checkpoint.every=4");
  ASSERT_EQ(balanced.exit_code, 0) << balanced.output;
  auto unbalanced =
      run_kiln("run " + exp + " --name unbalanced --set model.moe_bias_update_rate=0");
  ASSERT_EQ(unbalanced.exit_code, 0) << unbalanced.output;

  // Over the second half of the run, both blocks: the biased routing is the more even.
  const auto with_bias = imbalances("balanced", 13), without = imbalances("unbalanced", 13);
  ASSERT_EQ(with_bias.size(), 24u);
  ASSERT_EQ(without.size(), 24u);
  EXPECT_LT(mean(with_bias), mean(without) - 0.05) << mean(with_bias) << " vs " << mean(without);
  std::cout << "mean load imbalance over steps 13-24: " << mean(with_bias) << " with the bias, "
            << mean(without) << " without\n";

  // Killed right after its second snapshot (step 8), resumed: the same losses and loads.
  const std::string log = dir_ / "victim.log";
  auto killed = testing::run_child({"run", exp, "--name", "victim", "--set", "checkpoint.every=4"},
                                   log, "snapshot.published:2");
  ASSERT_TRUE(killed.killed) << testing::read_file(log);
  auto resumed = run_kiln("resume victim --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming after step 8"), std::string::npos) << resumed.output;
  EXPECT_EQ(losses("victim"), losses("balanced"));
  EXPECT_EQ(imbalances("victim", 1), imbalances("balanced", 1));
}

}  // namespace
}  // namespace kiln
