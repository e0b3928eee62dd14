#include <cmath>

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "core/kernels/fused_gelu.h"
#include "tensor_compare.h"

namespace kiln {
namespace {

// GPT-2's GELU written out here, in double precision, from its definition.
at::Tensor reference_gelu(const at::Tensor& x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + at::tanh(k * (x + 0.044715 * x * x * x)));
}

using testing::max_difference;

// Output and input gradient of the fused kernel against the double-precision reference and
// LibTorch's own op, for `x` (float32, any strides).
void expect_matches(const at::Tensor& x) {
  const at::Tensor leaf = x.detach().requires_grad_();
  const at::Tensor fused = fused_gelu_tanh(leaf);
  const at::Tensor upstream = at::randn(fused.sizes());
  const at::Tensor fused_grad = torch::autograd::grad({fused}, {leaf}, {upstream})[0];

  const at::Tensor exact_leaf = x.detach().to(at::kDouble).requires_grad_();
  const at::Tensor exact = reference_gelu(exact_leaf);
  const at::Tensor exact_grad =
      torch::autograd::grad({exact}, {exact_leaf}, {upstream.to(at::kDouble)})[0];

  const at::Tensor torch_leaf = x.detach().requires_grad_();
  const at::Tensor torch_out = gelu_tanh(torch_leaf, /*fused=*/false);
  const at::Tensor torch_grad = torch::autograd::grad({torch_out}, {torch_leaf}, {upstream})[0];

  EXPECT_LT(max_difference(fused, exact), 1e-5);
  EXPECT_LT(max_difference(fused_grad, exact_grad), 1e-5);
  EXPECT_LT(max_difference(fused, torch_out), 1e-5);
  EXPECT_LT(max_difference(fused_grad, torch_grad), 1e-5);
}

TEST(FusedGelu, MatchesTheDefinitionAndLibTorchOnOddSizes) {
  at::manual_seed(7);
  for (int64_t n : {1, 7, 8, 9, 31, 1000, 40003})
    expect_matches(at::randn({n}) * 3.0);
  expect_matches(at::randn({3, 5, 17}));
}

TEST(FusedGelu, LargeAndTinyInputs) {
  // Far tails (tanh saturates: gelu is x or 0) and the neighbourhood of 0, where tanh's
  // (1 - e) / (1 + e) loses relative precision.
  expect_matches(at::tensor({-40.0f, -12.0f, -5.5f, -1e-4f, 0.0f, 1e-7f, 3e-3f, 6.0f, 50.0f}));
}

TEST(FusedGelu, NonContiguousInput) {
  at::manual_seed(8);
  expect_matches(at::randn({33, 20}).t());
  expect_matches(at::randn({4, 64, 40}).narrow(2, 3, 29));
}

TEST(FusedGelu, OtherTensorsTakeLibTorchsOp) {
  const at::Tensor doubles = at::randn({11}, at::kDouble);
  EXPECT_FALSE(fused_gelu_applies(doubles));
  EXPECT_TRUE(at::equal(gelu_tanh(doubles, /*fused=*/true), at::gelu(doubles, "tanh")));
  const at::Tensor halves = at::randn({11}).to(at::kBFloat16);
  EXPECT_FALSE(fused_gelu_applies(halves));
  EXPECT_TRUE(at::equal(gelu_tanh(halves, /*fused=*/true), at::gelu(halves, "tanh")));
  EXPECT_TRUE(fused_gelu_applies(at::randn({2, 3})));
}

}  // namespace
}  // namespace kiln
