// Kiln's counter-based dropout (core/layers/random_draws.h, core/layers/dropout.h): the generator
// against SplitMix64's published outputs, the two implementations of the mask against each
// other, slices against the whole tensor, and the statistics a dropout mask must have.
#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/layers/dropout.h"
#include "core/layers/random_draws.h"
#include "core/util/counter_hash.h"

namespace kiln {
namespace {

// Outputs 1-5 of SplitMix64 seeded with 1234567, as Vigna's reference splitmix64.c prints them
// (they also come out of java.util.SplittableRandom's mixer; any SplitMix64 agrees).
TEST(RandomDraws, SplitMixGivesTheReferenceOutputs) {
  const uint64_t want[] = {6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull,
                           4593380528125082431ull, 16408922859458223821ull};
  for (uint64_t i = 0; i < 5; ++i)
    EXPECT_EQ(splitmix64_output(1234567, i), want[i]) << "output " << i;
}

// The documented key chain, element by element, for a few elements of a whole tensor.
TEST(RandomDraws, AMaskElementIsTheKeyChainsDraw) {
  DrawScope scope(DrawKey{42, 7, 100});
  const double p = 0.3;
  at::Tensor mask = dropout_mask(at::ones({3, 5, 4}), p, /*site=*/9);
  const uint64_t site_key = splitmix64_output(splitmix64_output(42, 7), 9);
  for (int64_t row : {0, 2}) {
    const uint64_t sample_key = splitmix64_output(site_key, static_cast<uint64_t>(100 + row));
    for (int64_t e : {0, 7, 19}) {
      const bool kept = (splitmix64_output(sample_key, static_cast<uint64_t>(e)) >> 40) >=
                        static_cast<uint64_t>(std::llround(p * (1 << 24)));
      EXPECT_FLOAT_EQ(mask[row].view(-1)[e].item<float>(), kept ? float(1 / (1 - p)) : 0.0f)
          << "row " << row << " element " << e;
    }
  }
}

TEST(RandomDraws, TheTensorOpsMaskEqualsTheLoopsBitForBit) {
  DrawScope scope(DrawKey{1337, 3, 16});
  for (auto dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
    at::Tensor x = at::ones({4, 3, 6, 5}, at::TensorOptions().dtype(dtype));
    EXPECT_TRUE(at::equal(dropout_mask(x, 0.1, 5), dropout_mask_by_tensor_ops(x, 0.1, 5)));
    const SliceOf slice{2, 6, 18};
    EXPECT_TRUE(
        at::equal(dropout_mask(x, 0.5, 5, slice), dropout_mask_by_tensor_ops(x, 0.5, 5, slice)));
  }
}

// Tensor parallelism: each rank's heads, masked on their own, are the whole layer's masks.
TEST(RandomDraws, TheMasksOfASlicedLayerSideBySideAreTheWholeLayersMasks) {
  DrawScope scope(DrawKey{7, 11, 32});
  const at::Tensor weights = at::ones({2, 6, 8, 8});  // [batch, heads, time, time]
  const at::Tensor whole = dropout_mask(weights, 0.1, 3);
  for (int ranks : {2, 3}) {
    std::vector<at::Tensor> slices;
    const int64_t heads = 6 / ranks;
    for (int r = 0; r < ranks; ++r) {
      const SliceOf mine{1, r * heads, 6};
      slices.push_back(dropout_mask(weights.narrow(1, r * heads, heads), 0.1, 3, mine));
    }
    EXPECT_TRUE(at::equal(at::cat(slices, 1), whole)) << ranks << " ranks";
  }
}

// Data parallelism: a sample's mask follows its index in the step's global batch, whichever
// micro-batch (rank, micro-step) holds it.
TEST(RandomDraws, ASamplesMaskDependsOnItsGlobalIndexOnly) {
  const at::Tensor x = at::ones({4, 16, 8});
  at::Tensor four, two;
  {
    DrawScope scope(DrawKey{5, 2, 0});
    four = dropout_mask(x, 0.2, 1);
  }
  {
    DrawScope scope(DrawKey{5, 2, 2});
    two = dropout_mask(x.narrow(0, 0, 2), 0.2, 1);
  }
  EXPECT_TRUE(at::equal(four.narrow(0, 2, 2), two));
  EXPECT_FALSE(at::equal(four.narrow(0, 0, 2), two));
}

// Over 2^20 elements the dropped fraction is p within 5 standard deviations of a binomial count,
// and two different keys (site, step, sample) agree on an element as often as independent masks
// do: p^2 + (1 - p)^2.
TEST(RandomDraws, MasksDropAFractionPIndependentlyAcrossSitesStepsAndSamples) {
  const double p = 0.1;
  const double n = 1 << 20;
  const at::Tensor x = at::ones({16, 256, 256});
  auto dropped = [](const at::Tensor& mask) { return mask.eq(0); };
  at::Tensor base, other_site, other_step, other_sample;
  {
    DrawScope scope(DrawKey{1, 1, 0});
    base = dropped(dropout_mask(x, p, 1));
    other_site = dropped(dropout_mask(x, p, 2));
  }
  {
    DrawScope scope(DrawKey{1, 2, 0});
    other_step = dropped(dropout_mask(x, p, 1));
  }
  {
    DrawScope scope(DrawKey{1, 1, 16});
    other_sample = dropped(dropout_mask(x, p, 1));
  }
  const double sd = std::sqrt(n * p * (1 - p));
  EXPECT_NEAR(base.sum().item<double>(), n * p, 5 * sd);
  const double agree = p * p + (1 - p) * (1 - p);
  const double agree_sd = std::sqrt(n * agree * (1 - agree));
  for (const auto& other : {other_site, other_step, other_sample})
    EXPECT_NEAR(base.eq(other).sum().item<double>(), n * agree, 5 * agree_sd);
}

TEST(RandomDraws, ScopesNestAndWithoutOneEachDrawTakesAFreshSeedFromLibTorch) {
  EXPECT_FALSE(current_draws().has_value());
  {
    DrawScope outer(DrawKey{1, 2, 3});
    {
      DrawScope inner(DrawKey{4, 5, 6});
      EXPECT_EQ(current_draws()->seed, 4u);
    }
    EXPECT_EQ(current_draws()->step, 2);
  }
  EXPECT_FALSE(current_draws().has_value());
  const at::Tensor x = at::ones({2, 64});
  torch::manual_seed(9);
  const at::Tensor first = dropout_mask(x, 0.5, 0), second = dropout_mask(x, 0.5, 0);
  torch::manual_seed(9);
  EXPECT_FALSE(at::equal(first, second));
  EXPECT_TRUE(at::equal(first, dropout_mask(x, 0.5, 0)));
}

TEST(RandomDraws, DropoutScalesKeptElementsAndIsTheIdentityOutOfTraining) {
  DrawScope scope(DrawKey{3, 1, 0});
  const at::Tensor x = at::randn({8, 32});
  const at::Tensor mask = dropout_mask(x, 0.25, 4);
  EXPECT_TRUE(at::allclose(dropout(x, 0.25, true, 4), x * mask));
  EXPECT_TRUE(at::equal(dropout(x, 0.25, false, 4), x));
  EXPECT_TRUE(at::equal(dropout(x, 0.0, true, 4), x));
  EXPECT_THROW(dropout_mask(x, 1.0, 4), std::invalid_argument);
  EXPECT_THROW(dropout_mask(x, 0.1, 4, SliceOf{1, 30, 40}), std::invalid_argument);
}

// Dropout of a bf16 x keeps its dtype and scales each kept element by 1 / (1 - p) to fp32's
// precision, rounded to bf16 once: 7 * 1.1111 = 7.78125 in bf16 (p = 0.1), not 7 * bf16(1.1111)
// = 7 * 1.109375 = 7.75.
// Checked against the definition computed in double from the kept elements.
TEST(RandomDraws, ABf16DropoutScalesByTheExactKeepFactor) {
  DrawScope scope(DrawKey{5, 1, 0});
  const at::Tensor x = at::full({4, 256}, 7.0, at::kBFloat16);  // 7.78125, not 7.75
  const at::Tensor out = dropout(x, 0.1, /*training=*/true, /*site=*/2);
  ASSERT_EQ(out.scalar_type(), at::kBFloat16);
  const at::Tensor kept = out.to(at::kDouble).ne(0);
  ASSERT_GT(kept.sum().item<int64_t>(), 0);
  const double want = static_cast<double>(
      at::tensor(7.0 / 0.9, at::kDouble).to(at::kBFloat16).to(at::kDouble).item<double>());
  EXPECT_EQ(out.to(at::kDouble).masked_select(kept).max().item<double>(), want);
  EXPECT_EQ(out.to(at::kDouble).masked_select(kept).min().item<double>(), want);
  // The mask itself is fp32 for a bf16 x, 1 / 0.9 to fp32's precision where kept.
  const at::Tensor mask = dropout_mask(x, 0.1, 2);
  EXPECT_EQ(mask.scalar_type(), at::kFloat);
  EXPECT_FLOAT_EQ(mask.max().item<float>(), static_cast<float>(1 / 0.9));
}

}  // namespace
}  // namespace kiln
