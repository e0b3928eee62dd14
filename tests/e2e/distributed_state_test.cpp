// What each of two Gloo ranks holds: ZeRO stage 2 keeps its shard of the gradients plus about
// one bucket (checked against the model's parameter bytes, counted here from its shapes), and a
// snapshot keeps every rank's RNG state and data position, so a run with dropout resumes bit for
// bit on two ranks under every strategy.
#include <algorithm>

#include "ranks.h"
#include "snapshot_writers.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::run_ranks;
using DistributedState = testing::TinyRun;
using DistributedStateResume = testing::EachSnapshotWriter<>;

KILN_EACH_SNAPSHOT_WRITER(DistributedStateResume);

// The tiny experiment's GPT (tiny_run.h): n_layer 2, n_embd 32, block_size 32, vocab_size 64
// (vocab_multiple 1: no padding rows), biases on; the output head is the token embedding.
// Element counts in the order the model registers them: GPT-2's layout.
std::vector<int64_t> tiny_gpt_parameter_sizes() {
  const int64_t c = 32, vocab = 64, context = 32, layers = 2;
  std::vector<int64_t> sizes = {vocab * c, context * c};  // wte, wpe
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t n : {c, c, c * 3 * c, 3 * c, c * c, c, c, c, c * 4 * c, 4 * c, 4 * c * c, c})
      sizes.push_back(n);  // ln_1, c_attn, attn_proj, ln_2, c_fc, mlp_proj: weight, bias
  }
  sizes.push_back(c);  // ln_f
  sizes.push_back(c);
  return sizes;
}

TEST_F(DistributedState, ZeroStageTwoHoldsItsShardAndOneBucketOfGradientsAndStageOneAll) {
  const std::string exp = experiment();
  std::vector<int64_t> sizes = tiny_gpt_parameter_sizes();
  int64_t total = 0;
  for (int64_t n : sizes)
    total += n;
  const int64_t all_bytes = 4 * total;  // fp32
  const int64_t largest = 4 * *std::max_element(sizes.begin(), sizes.end());
  const double bucket_mb = 0.01;
  // A bucket is at most bucket_mb, or one parameter larger than that.
  const int64_t bucket = std::max<int64_t>(static_cast<int64_t>(bucket_mb * (1 << 20)), largest);
  // Each rank's shard: the parameters whose middle element falls in its half of all elements.
  std::vector<int64_t> shard(2, 0);
  int64_t offset = 0;
  for (int64_t n : sizes) {
    shard[std::min<int64_t>(1, (offset + n / 2) * 2 / total)] += 4 * n;
    offset += n;
  }
  // peaks: the gradients' bytes as zero counts them; measured: every tensor's, as the allocator
  // saw them at the most within the step (core/util/allocation_meter.h).
  std::map<int, std::vector<int64_t>> peaks, measured;
  for (int stage : {1, 2}) {
    auto bench = run_kiln(fmt::format(
        "launch --nproc-per-node 2 --master-port {} -- bench {} --steps 2 --warmup 1 --set "
        "model.vocab_multiple=1 --set parallel.type=zero --set parallel.stage={} --set "
        "parallel.bucket_mb={} --set train.micro_batch=4 --set train.batch_tokens=512",
        testing::free_local_port(), exp, stage, bucket_mb));
    ASSERT_EQ(bench.exit_code, 0) << bench.output;
    peaks[stage] = testing::bytes_per_rank(bench.output, "peak gradients");
    ASSERT_EQ(peaks[stage].size(), 2u) << bench.output;
    measured[stage] = testing::bytes_per_rank(bench.output, "memory peak");
    ASSERT_EQ(measured[stage].size(), 2u) << bench.output;
  }
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(fmt::format("rank {}", r));
    EXPECT_EQ(peaks[1][r], all_bytes);  // stage 1: every gradient, at the end of backward
    EXPECT_GE(peaks[2][r], shard[r]);
    EXPECT_LE(peaks[2][r], shard[r] + bucket);
    EXPECT_LT(peaks[2][r], peaks[1][r]);
    // Stage 2 frees each bucket's gradients once reduced: its measured peak is lower by at least
    // half of what stage 1 holds beyond its shard (the activations are the same in both).
    EXPECT_LT(measured[2][r], measured[1][r] - (all_bytes - shard[r]) / 2);
  }
}

// Two micro-steps per rank: stage 2 reduces each into the shards and still follows one process.
TEST_F(DistributedState, ZeroStageTwoWithGradientAccumulationFollowsTheSingleProcessCurve) {
  const std::string exp = experiment();
  const std::string same =
      " --set train.steps=12 --set train.micro_batch=4 --set train.batch_tokens=512 "
      "--set eval.every=0 --set checkpoint.every=0";
  auto single = run_kiln("run " + exp + " --name one" + same);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const std::string logs = dir_ / "z2_rank";
  auto codes = run_ranks(
      2, "run " + exp + " --name z2 --set parallel.type=zero --set parallel.stage=2" + same, logs);
  ASSERT_EQ(codes, (std::vector<int>{0, 0})) << testing::read_file(logs + "0.log");
  EXPECT_NE(testing::read_file(logs + "0.log").find("x 2 micro-steps x 2 rank(s)"),
            std::string::npos);
  expect_same_curve("one", "z2", 12);
}

// Dropout draws from each rank's generator: a pipeline's stages draw different numbers, so a
// resume that gave every rank rank 0's state would change the masks after it.
TEST_P(DistributedStateResume, TwoRanksWithDropoutResumeBitForBitUnderEveryStrategy) {
  const std::string exp = experiment("[schedule]\ntype = \"constant\"\n");
  const std::string base =
      " --set model.dropout=0.1 --set train.micro_batch=4 --set eval.every=0 "
      "--set checkpoint.every=4";
  const std::vector<std::pair<std::string, std::string>> strategies = {
      {"ddp", "--set parallel.type=ddp --set train.batch_tokens=256"},
      {"zero1", "--set parallel.type=zero --set parallel.stage=1 --set train.batch_tokens=512"},
      {"zero2", "--set parallel.type=zero --set parallel.stage=2 --set train.batch_tokens=512"},
      {"pipeline",
       "--set parallel.type=pipeline --set parallel.pp=2 --set parallel.microbatches=4 "
       "--set train.batch_tokens=512"},
      {"fsdp", "--set parallel.type=fsdp --set train.batch_tokens=512"},
      {"tensor", "--set parallel.type=tensor --set parallel.tp=2 --set train.batch_tokens=256"},
  };
  for (const auto& [name, settings] : strategies) {
    SCOPED_TRACE(name);
    const std::string logs = dir_ / (name + "_rank");
    const std::string whole = "run " + exp + " --name " + name + "_whole " + settings + base;
    ASSERT_EQ(run_ranks(2, whole + " --set train.steps=12"), (std::vector<int>{0, 0}));
    const std::string cut = "run " + exp + " --name " + name + " " + settings + base;
    ASSERT_EQ(run_ranks(2, cut + " --set train.steps=8", logs), (std::vector<int>{0, 0}))
        << testing::read_file(logs + "0.log");
    ASSERT_EQ(run_ranks(2, "resume " + name + " --set train.steps=12 --db " + db(), logs),
              (std::vector<int>{0, 0}))
        << testing::read_file(logs + "0.log");
    const std::string resumed = testing::read_file(logs + "0.log");
    EXPECT_EQ(resumed.find("note: snapshot"), std::string::npos) << resumed;
    auto a = losses(name + "_whole"), b = losses(name);
    ASSERT_EQ(a.size(), 12u);
    ASSERT_EQ(b.size(), 12u);
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(a[i], b[i]) << "step " << i + 1;  // bit for bit
  }
}

}  // namespace
}  // namespace kiln
