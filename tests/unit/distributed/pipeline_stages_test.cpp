#include "core/distributed/pipeline_stages.h"

#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "core/util/error.h"

namespace kiln {
namespace {

TEST(PipelineStages, TwoStagesCutWhereTheHalvesAreClosestToEqual) {
  // Embedding, six blocks of growing size, head: every cut is tried here, by brute force.
  const std::vector<int64_t> sizes = {500, 10, 20, 30, 40, 50, 60, 5};
  const double total = std::accumulate(sizes.begin(), sizes.end(), 0.0);
  size_t best = 1;
  double best_gap = 1e18;
  for (size_t cut = 1; cut < sizes.size(); ++cut) {
    const double before = std::accumulate(sizes.begin(), sizes.begin() + cut, 0.0);
    if (std::abs(before - total / 2) < best_gap) {
      best_gap = std::abs(before - total / 2);
      best = cut;
    }
  }
  EXPECT_EQ(pipeline_stage_starts(sizes, 2, ""), (std::vector<size_t>{0, best, sizes.size()}));
}

TEST(PipelineStages, EveryStageGetsALayerEvenWhenOneLayerOutweighsTheRest) {
  const std::vector<int64_t> sizes = {1000000, 1, 1, 1};
  EXPECT_EQ(pipeline_stage_starts(sizes, 4, ""), (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(PipelineStages, ExplicitSplitPointsAreTakenAsGiven) {
  EXPECT_EQ(pipeline_stage_starts({1, 1, 1, 1, 1, 1}, 3, "2,5"), (std::vector<size_t>{0, 2, 5, 6}));
}

TEST(PipelineStages, CutsThatDoNotFitAreRefused) {
  EXPECT_THROW(pipeline_stage_starts({1, 1}, 3, ""), UserError);         // more stages than layers
  EXPECT_THROW(pipeline_stage_starts({1, 1, 1, 1}, 2, "4"), UserError);  // past the last layer
  EXPECT_THROW(pipeline_stage_starts({1, 1, 1, 1}, 3, "2,1"), UserError);  // not ascending
  EXPECT_THROW(pipeline_stage_starts({1, 1, 1, 1}, 3, "2"), UserError);    // too few cuts
  EXPECT_THROW(pipeline_stage_starts({1, 1, 1, 1}, 2, "x"), UserError);    // not a number
}

}  // namespace
}  // namespace kiln
