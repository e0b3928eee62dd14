// The step's one all-reduce of loss, norm and per-rank times (core/train/step_telemetry.h): what
// a rank reads back is checked against the figures each rank put in, combined here by the
// formulas the StepStats fields document.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core/api/parallel.h"
#include "core/train/step_telemetry.h"

namespace kiln {
namespace {

// Rank `rank` of a two-stage pipeline (one replica) whose times are given; only the last stage
// computes the loss. sum() adds `other`, the tensor the other rank put in, as an all-reduce
// would; with no `other` it keeps what it was given there.
class PipelineRank : public ParallelStrategy {
 public:
  PipelineRank(int rank, PassTimes times) : rank_(rank), times_(times) {}
  int rank() const override { return rank_; }
  int world_size() const override { return 2; }
  int stages() const override { return 2; }
  double loss_share() const override { return rank_ == 1 ? 1.0 : 0.0; }
  PassTimes pass_times() const override { return times_; }
  at::Tensor sum(const at::Tensor& value) override {
    sent = value.clone();
    return other.defined() ? value + other : value;
  }
  at::Tensor sent, other;

 private:
  int rank_;
  PassTimes times_;
};

TEST(StepTelemetry, OneRankReadsBackItsOwnLossAndNorm) {
  ParallelStrategy single;
  StepStats stats;
  gather_step_figures(single, torch::tensor(2.5f), torch::tensor(0.75f), 12.0, stats);
  EXPECT_EQ(stats.loss, 2.5);
  EXPECT_EQ(stats.grad_norm, 0.75);
  EXPECT_EQ(stats.rank_skew_ms, 0.0);
  EXPECT_TRUE(stats.stage_compute_ms.empty());
  EXPECT_FALSE(stats.bubble.has_value());
}

TEST(StepTelemetry, APipelinesRanksShareTheirTimesInTheOneSum) {
  PipelineRank first(0, {30.0, 40.0, 3}), last(1, {20.0, 50.0, 2});
  StepStats ignored, stats;
  // The first stage computes no loss (its share is 0); both hold the same global norm.
  gather_step_figures(first, torch::tensor(9.0f), torch::tensor(3.0f), 100.0, ignored);
  last.other = first.sent;
  gather_step_figures(last, torch::tensor(2.5f), torch::tensor(3.0f), 112.5, stats);
  EXPECT_EQ(stats.loss, 2.5);
  EXPECT_EQ(stats.grad_norm, 3.0);
  EXPECT_EQ(stats.rank_skew_ms, 112.5 - 100.0);
  EXPECT_EQ(stats.stage_compute_ms, (std::vector<double>{30.0, 20.0}));
  EXPECT_EQ(stats.stage_peak_live, (std::vector<int64_t>{3, 2}));
  ASSERT_TRUE(stats.bubble.has_value());
  EXPECT_DOUBLE_EQ(*stats.bubble, 1.0 - (30.0 + 20.0) / (40.0 + 50.0));
}

}  // namespace
}  // namespace kiln
