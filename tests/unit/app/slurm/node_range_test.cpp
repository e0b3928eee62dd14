// --nodes MIN-MAX (core/app/slurm/node_range.h) against arithmetic written out here: the global
// batch a submission pins (micro_batch x seq_len x the ranks reading data at the largest world),
// the smaller worlds it refuses (a batch that is no whole number of micro-steps there, a tp that
// does not divide), and the rendezvous ports of relaunches, none of which is any job's first port.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/app/slurm/node_range.h"
#include "core/train/step_batch.h"
#include "test_util.h"

namespace kiln {
namespace {

using Strings = std::vector<std::string>;

constexpr int64_t kMicroBatch = 4, kSeqLen = 32;

class NodeRange : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_text(base(),
                        "[model]\ntype = \"gpt\"\nblock_size = 32\n\n[train]\nsteps = 10\n"
                        "micro_batch = 4\nseq_len = 32\n");
  }
  std::string base() const { return dir_ / "base.toml"; }

  static SlurmOptions range(int fewest, int most, int ranks_per_node = 1) {
    SlurmOptions slurm;
    slurm.min_nodes = fewest;
    slurm.nodes = most;
    slurm.ntasks_per_node = ranks_per_node;
    return slurm;
  }

  testing::TempDir dir_;
};

TEST_F(NodeRange, ADefaultBatchIsPinnedAtTheLargestWorld) {
  const Strings ddp = {"parallel.type=\"ddp\""};
  // 2 nodes of one rank: each step reads micro_batch x seq_len x 2 ranks.
  EXPECT_EQ(pin_global_batch(base(), ddp, range(1, 2)),
            Strings{"train.batch_tokens=" + std::to_string(kMicroBatch * kSeqLen * 2)});
  // A batch that is set stays as it is; 512 tokens divide at 2 and at 1 rank.
  EXPECT_EQ(
      pin_global_batch(base(), {"parallel.type=\"ddp\"", "train.batch_tokens=512"}, range(1, 2)),
      Strings{});
  // tp = 2 on 2 nodes of 2 ranks: 2 replicas read data, 1 on the node left, which keeps the
  // batch with twice the micro-steps.
  EXPECT_EQ(pin_global_batch(base(), {"parallel.type=\"tensor\"", "parallel.tp=2"}, range(1, 2, 2)),
            Strings{"train.batch_tokens=" + std::to_string(kMicroBatch * kSeqLen * 2)});
}

TEST_F(NodeRange, ASmallerWorldThatCannotKeepTheBatchIsRefusedAtSubmission) {
  // 3 ranks pin 384 tokens, which 2 ranks' 256 tokens a micro-step do not divide; 768 would.
  const std::string batch = testing::user_error_of(
      [&] { pin_global_batch(base(), {"parallel.type=\"ddp\""}, range(2, 3)); });
  EXPECT_NE(batch.find("--nodes 2-3: a member that loses nodes would go on at 2 node(s), 2 "
                       "rank(s), where it is not the same run: its global batch of 384 tokens"),
            std::string::npos)
      << batch;
  EXPECT_NE(batch.find("= 256 tokens there: set train.batch_tokens to a multiple of 768"),
            std::string::npos)
      << batch;
  // tp = 2 cannot run on the one rank of the node left.
  const std::string tp = testing::user_error_of([&] {
    pin_global_batch(base(), {"parallel.type=\"tensor\"", "parallel.tp=2"}, range(1, 2));
  });
  EXPECT_NE(tp.find("at 1 node(s), 1 rank(s), where it is not the same run: parallel.tp = 2 does "
                    "not divide the world of 1 process(es)"),
            std::string::npos)
      << tp;
}

TEST_F(NodeRange, ATaskSubmittedWithoutAPinnedBatchDoesNotShrink) {
  const ResolvedConfig config = load_config(base(), {"parallel.type=\"ddp\""});
  EXPECT_EQ(cannot_shrink(config, 2, 1),
            "its global batch would be 128 tokens there instead of 256 (train.batch_tokens = 0 "
            "follows the world): set train.batch_tokens = 256");
  const ResolvedConfig pinned =
      load_config(base(), {"parallel.type=\"ddp\"", "train.batch_tokens=256"});
  EXPECT_EQ(cannot_shrink(pinned, 2, 1), "");
}

TEST_F(NodeRange, AShrinkSaysWhatBecameOfTheBatch) {
  const ResolvedConfig config =
      load_config(base(), {"parallel.type=\"ddp\"", "train.batch_tokens=768"});
  EXPECT_EQ(world_change(step_batch(config, 3), step_batch(config, 2)),
            "world size 3 -> 2: global batch kept at 768 tokens, each rank now 3 micro-step(s) of "
            "4 sequences (was 2)");
}

// Job j's first port is 20000 + j mod 20000: every port from 20000 to 39999 is some job's. No
// relaunch port may be one of them (it would meet a later job's ranks), and the first 8
// relaunches of 2500 jobs in a row have ports of their own.
TEST(NodeRangePorts, ARelaunchNeverTakesAnotherJobsFirstPort) {
  std::set<int> first_ports;
  for (int64_t job = 0; job < 20000; ++job)
    first_ports.insert(20000 + static_cast<int>(job % 20000));
  for (int64_t job : {int64_t{1}, int64_t{19999}, int64_t{20000}, int64_t{123456}})
    EXPECT_EQ(rendezvous_port(job, 0), 20000 + job % 20000);
  std::set<int> relaunch_ports;
  for (int64_t job = 7000; job < 7000 + 2500; ++job) {
    for (int relaunch = 1; relaunch <= 8; ++relaunch) {
      const int port = rendezvous_port(job, relaunch);
      EXPECT_EQ(first_ports.count(port), 0u) << "job " << job << " relaunch " << relaunch;
      EXPECT_LE(port, 65535);
      relaunch_ports.insert(port);
    }
  }
  EXPECT_EQ(relaunch_ports.size(), 2500u * 8u);
}

}  // namespace
}  // namespace kiln
