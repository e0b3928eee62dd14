// The fused cross-entropy (core/kernels/fused_cross_entropy.h) against LibTorch's cross_entropy in
// double precision, loss and gradient: vocabularies that are and are not multiples of the vector
// width up to GPT-2's, skipped targets, sums and means, logits far from zero, and rows that are a
// narrowed view of wider ones (a padded vocabulary).
#include <string>

#include <gtest/gtest.h>

#include "core/kernels/fused_cross_entropy.h"
#include "tensor_compare.h"

namespace kiln {
namespace {

using testing::max_difference;

constexpr int64_t kIgnore = -100;

// LibTorch's loss and gradient for `logits`, in `type`.
std::pair<at::Tensor, at::Tensor> libtorchs(const at::Tensor& logits, const at::Tensor& targets,
                                            bool sum, at::ScalarType type) {
  at::Tensor x = logits.detach().to(type).requires_grad_();
  at::Tensor loss = at::cross_entropy_loss(x, targets, {},
                                           sum ? at::Reduction::Sum : at::Reduction::Mean, kIgnore);
  loss.backward();
  return {loss.detach(), x.grad()};
}

// Within float32's rounding of the reference in double precision: no further from it than
// LibTorch's own float32 op (twice its distance, or 1e-6).
void expect_matches_libtorch(const at::Tensor& logits, const at::Tensor& targets, bool sum) {
  at::Tensor x = logits.detach().requires_grad_();
  ASSERT_TRUE(fused_cross_entropy_applies(x, targets));
  at::Tensor loss = cross_entropy(x, targets, kIgnore, sum, /*fused=*/true);
  loss.backward();
  const auto [want_loss, want_grad] = libtorchs(logits, targets, sum, at::kDouble);
  const auto [float_loss, float_grad] = libtorchs(logits, targets, sum, at::kFloat);
  EXPECT_LE(max_difference(loss, want_loss),
            std::max(2 * max_difference(float_loss, want_loss), 1e-6));
  EXPECT_LE(max_difference(x.grad(), want_grad),
            std::max(2 * max_difference(float_grad, want_grad), 1e-6));
}

TEST(FusedCrossEntropy, LossAndGradientMatchLibTorchsInDoublePrecision) {
  for (int64_t vocab : {1, 7, 8, 13, 65, 50257}) {
    for (bool sum : {false, true}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + (sum ? ", sum" : ", mean"));
      torch::manual_seed(static_cast<uint64_t>(vocab));
      at::Tensor logits = at::randn({6, vocab}) * 4;
      at::Tensor targets = at::randint(vocab, {6}, at::kLong);
      targets[1] = kIgnore;
      targets[4] = kIgnore;
      expect_matches_libtorch(logits, targets, sum);
    }
  }
}

TEST(FusedCrossEntropy, LogitsFarFromZeroKeepFloat32sPrecision) {
  torch::manual_seed(1);
  at::Tensor logits = at::randn({4, 300}) * 40 + 1000;
  expect_matches_libtorch(logits, at::randint(300, {4}, at::kLong), /*sum=*/false);
}

TEST(FusedCrossEntropy, RowsNarrowedFromAPaddedVocabulary) {
  torch::manual_seed(2);
  at::Tensor padded = at::randn({5, 64});
  at::Tensor logits = padded.narrow(1, 0, 50);
  ASSERT_FALSE(logits.is_contiguous());
  expect_matches_libtorch(logits, at::randint(50, {5}, at::kLong), /*sum=*/true);
}

TEST(FusedCrossEntropy, EveryTargetSkippedGivesLibTorchsMeanAndSum) {
  at::Tensor logits = at::randn({3, 9});
  at::Tensor targets = at::full({3}, kIgnore, at::kLong);
  EXPECT_TRUE(cross_entropy(logits, targets, kIgnore, /*sum=*/false, true).isnan().item<bool>());
  EXPECT_EQ(cross_entropy(logits, targets, kIgnore, /*sum=*/true, true).item<double>(), 0.0);
}

TEST(FusedCrossEntropy, ATargetOutsideTheVocabularyIsRefusedAsLibTorchRefusesIt) {
  at::Tensor logits = at::randn({2, 9});
  EXPECT_THROW(cross_entropy(logits, at::tensor({3, 9}, at::kLong), kIgnore, false, true),
               c10::Error);
  EXPECT_THROW(cross_entropy(logits, at::tensor({-2, 1}, at::kLong), kIgnore, false, true),
               c10::Error);
}

TEST(FusedCrossEntropy, OtherTypesAndShapesKeepLibTorchsOp) {
  at::Tensor logits = at::randn({2, 8});
  at::Tensor targets = at::tensor({1, 2}, at::kLong);
  EXPECT_FALSE(fused_cross_entropy_applies(logits.to(at::kBFloat16), targets));
  EXPECT_FALSE(fused_cross_entropy_applies(logits.t(), targets));
  EXPECT_FALSE(fused_cross_entropy_applies(logits.reshape({2, 2, 4}), targets));
  EXPECT_FALSE(fused_cross_entropy_applies(logits, targets.to(at::kInt)));
  at::Tensor half = logits.to(at::kBFloat16);
  EXPECT_TRUE(at::equal(cross_entropy(half, targets, kIgnore, false, true),
                        cross_entropy(half, targets, kIgnore, false, false)));
}

}  // namespace
}  // namespace kiln
