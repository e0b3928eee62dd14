// A blend's mixture (core/data/blend_order.h): over many rows each source's count is
// Binomial(rows, its share), so the realised proportions must fall inside the binomial bound the
// test computes; and a row's source depends on nothing but the seed, the split and its index.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/data/blend_order.h"

namespace kiln {
namespace {

TEST(BlendOrder, RealisedProportionsStayWithinTheBinomialBound) {
  const std::vector<std::vector<double>> blends = {
      {0.7, 0.2, 0.1}, {1, 1}, {5, 1, 1, 1}, {0.01, 1}};
  const int64_t rows = 10000;
  for (uint64_t seed : {1ULL, 1337ULL, 99ULL}) {
    for (const auto& weights : blends) {
      BlendOrder order(weights, seed, "train");
      std::vector<int64_t> counts(weights.size(), 0);
      for (int64_t g = 0; g < rows; ++g)
        ++counts[order.source_of(g)];
      double total = 0;
      for (double w : weights)
        total += w;
      for (size_t k = 0; k < weights.size(); ++k) {
        // 4.5 standard deviations: with 36 proportions checked, a false alarm has odds of about
        // 1 in 4,000 per run of the whole test (two-sided tail 6.8e-6 each).
        const double p = weights[k] / total;
        const double sd = std::sqrt(rows * p * (1 - p));
        EXPECT_NEAR(static_cast<double>(counts[k]), rows * p, 4.5 * sd)
            << "seed " << seed << ", source " << k << " of " << weights.size();
        EXPECT_NEAR(order.share(k), p, 1e-12);
      }
    }
  }
}

TEST(BlendOrder, ARowsSourceIsAFunctionOfSeedSplitAndIndexAlone) {
  BlendOrder a({0.5, 0.5}, 7, "train"), b({0.5, 0.5}, 7, "train");
  BlendOrder other_seed({0.5, 0.5}, 8, "train"), other_split({0.5, 0.5}, 7, "val");
  int differ_seed = 0, differ_split = 0;
  for (int64_t g = 999; g >= 0; --g) {  // backwards: no state carried from row to row
    EXPECT_EQ(a.source_of(g), b.source_of(g));
    differ_seed += a.source_of(g) != other_seed.source_of(g);
    differ_split += a.source_of(g) != other_split.source_of(g);
  }
  EXPECT_GT(differ_seed, 350);  // about half of 1,000 for independent draws
  EXPECT_GT(differ_split, 350);
  EXPECT_THROW(BlendOrder({1, 0}, 1, "train"), std::invalid_argument);
}

}  // namespace
}  // namespace kiln
