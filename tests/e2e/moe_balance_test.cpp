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
  // Two blocks of 4 experts, top 2, no router losses and no capacity: only the bias balances.
  std::string balanced_experiment() {
    const std::string path = dir_ / "balanced.toml";
    testing::write_text(path, fmt::format(R"([run]
db = "{0}"
out_dir = "{1}/runs"
threads = 1

[model]
type = "llama"
n_layer = 2
n_head = 4
n_embd = 32
ffn_dim = 64
block_size = 32
vocab_size = 64
moe_experts = 4
moe_top_k = 2
moe_ffn_dim = 32
moe_aux_loss_weight = 0
moe_bias_update_rate = 0.01

[data]
train = "{1}/data/train_*.bin"
val = "{1}/data/val_*.bin"

[train]
steps = 24
micro_batch = 4
seq_len = 32
batch_tokens = 256

[optimizer]
lr = 1e-2

[eval]
every = 0
)",
                                          db(), dir_.str()));
    return path;
  }

  std::vector<double> imbalances(const std::string& run, int from_step) {
    return testing::query_doubles(
        db(), fmt::format("select value from layer_metrics join runs on id = run_id where "
                          "runs.name = '{}' and layer_metrics.name like '%.load_imbalance' and "
                          "step >= {} order by step, layer_metrics.name",
                          run, from_step));
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
