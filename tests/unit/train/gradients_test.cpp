// The trainer's gradient clip (core/train/gradients.h) against LibTorch's own
// torch::nn::utils::clip_grad_norm_, on the same gradients; and the fault point's poisoned one.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <torch/nn/utils/clip_grad.h>
#include <torch/torch.h>

#include "core/api/parallel.h"
#include "core/train/gradients.h"

namespace kiln {
namespace {

// Three parameters with gradients of norm about `scale` x 6, and one without a gradient (a frozen
// weight), the same for every call.
std::vector<at::Tensor> parameters_with_gradients(double scale) {
  torch::manual_seed(7);
  std::vector<at::Tensor> all;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{4, 5}, {5}, {3, 2, 2}, {6}}) {
    all.push_back(torch::randn(shape).requires_grad_());
  }
  for (size_t i = 0; i + 1 < all.size(); ++i)
    all[i].mutable_grad() = torch::randn(all[i].sizes()) * scale;
  return all;
}

void expect_same_gradients(const std::vector<at::Tensor>& ours,
                           const std::vector<at::Tensor>& torchs) {
  for (size_t i = 0; i < ours.size(); ++i) {
    ASSERT_EQ(ours[i].grad().defined(), torchs[i].grad().defined()) << "parameter " << i;
    if (ours[i].grad().defined()) {
      EXPECT_TRUE(torch::allclose(ours[i].grad(), torchs[i].grad(), 1e-6, 1e-7))
          << "parameter " << i;
    }
  }
}

TEST(ClipGradients, ScalesLargeGradientsAsTorchClipGradNormDoes) {
  ParallelStrategy single;
  auto ours = parameters_with_gradients(10.0), torchs = parameters_with_gradients(10.0);
  const double norm = clip_gradients(ours, single, torch::kCPU, 1.0).item<double>();
  const double expected = torch::nn::utils::clip_grad_norm_(torchs, 1.0);
  EXPECT_GT(expected, 1.0);
  EXPECT_NEAR(norm, expected, 1e-6 * expected);
  expect_same_gradients(ours, torchs);
}

TEST(ClipGradients, LeavesGradientsBelowTheLimitAsTheyAre) {
  ParallelStrategy single;
  auto ours = parameters_with_gradients(0.01), torchs = parameters_with_gradients(0.01);
  const double norm = clip_gradients(ours, single, torch::kCPU, 1.0).item<double>();
  const double expected = torch::nn::utils::clip_grad_norm_(torchs, 1.0);
  EXPECT_LT(expected, 1.0);
  EXPECT_NEAR(norm, expected, 1e-6 * expected);
  expect_same_gradients(ours, torchs);
  expect_same_gradients(ours, parameters_with_gradients(0.01));
}

TEST(ClipGradients, WithoutAMaxNormOnlyMeasures) {
  ParallelStrategy single;
  auto ours = parameters_with_gradients(10.0), torchs = parameters_with_gradients(10.0);
  const double norm = clip_gradients(ours, single, torch::kCPU, 0.0).item<double>();
  // An unreachable limit makes torch's clip a measurement as well.
  const double expected = torch::nn::utils::clip_grad_norm_(torchs, 1e30);
  EXPECT_NEAR(norm, expected, 1e-6 * expected);
  expect_same_gradients(ours, parameters_with_gradients(10.0));
}

TEST(ClipGradients, ARankHoldingNoGradientMeasuresZero) {
  ParallelStrategy single;
  std::vector<at::Tensor> frozen = {torch::ones({3}).requires_grad_()};
  EXPECT_EQ(clip_gradients(frozen, single, torch::kCPU, 1.0).item<double>(), 0.0);
}

TEST(PoisonGradients, MakesTheFirstGradientsFirstElementInfinite) {
  auto all = parameters_with_gradients(1.0);
  all.insert(all.begin(), torch::ones({2}).requires_grad_());  // no gradient: passed over
  const at::Tensor before = all[1].grad().clone();
  poison_gradients(all);
  EXPECT_TRUE(std::isinf(all[1].grad().view(-1)[0].item<float>()));
  EXPECT_TRUE(torch::equal(all[1].grad().view(-1).slice(0, 1), before.view(-1).slice(0, 1)));
  expect_same_gradients({all[2], all[3]},
                        {parameters_with_gradients(1.0)[1], parameters_with_gradients(1.0)[2]});
}

}  // namespace
}  // namespace kiln
