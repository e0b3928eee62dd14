#include "core/distributed/tensor_parallel_ops.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace kiln {
namespace {

// Two ranks holding the same tensor: their sum is twice it, which the test knows without Kiln.
TensorParallelGroup two_identical_ranks() {
  return tensor_parallel_group(0, 2, [](at::Tensor& x) { x.mul_(2); });
}

TEST(TensorParallelOps, EnterPassesForwardAndSumsTheGradient) {
  auto x = torch::tensor({1.0, -2.0, 3.0}, torch::requires_grad());
  at::Tensor y = two_identical_ranks().enter(x);
  EXPECT_TRUE(torch::equal(y, torch::tensor({1.0, -2.0, 3.0})));
  (y * torch::tensor({1.0, 10.0, 100.0})).sum().backward();
  EXPECT_TRUE(torch::equal(x.grad(), torch::tensor({2.0, 20.0, 200.0})));
}

TEST(TensorParallelOps, LeaveSumsForwardAndPassesTheGradient) {
  auto x = torch::tensor({1.0, -2.0, 3.0}, torch::requires_grad());
  at::Tensor y = two_identical_ranks().leave(x);
  EXPECT_TRUE(torch::equal(y, torch::tensor({2.0, -4.0, 6.0})));
  EXPECT_TRUE(torch::equal(x, torch::tensor({1.0, -2.0, 3.0})));  // the input is left alone
  (y * torch::tensor({1.0, 10.0, 100.0})).sum().backward();
  EXPECT_TRUE(torch::equal(x.grad(), torch::tensor({1.0, 10.0, 100.0})));
}

TEST(TensorParallelOps, FusedQkvRowsAreCutBlockByBlock) {
  // Rows q0 q1 k0 k1 v0 v1 (blocks of 2 rows): rank 1 of 2 keeps q1 k1 v1.
  at::Tensor whole = torch::arange(12, torch::kFloat).reshape({6, 2});
  ParameterSplit split{"c_attn.weight", 0, 3};
  EXPECT_TRUE(torch::equal(slice_for_rank(whole, split, 1, 2),
                           torch::tensor({2.f, 3.f, 6.f, 7.f, 10.f, 11.f}).reshape({3, 2})));
  ParameterSplit columns{"attn_proj.weight", 1, 1};
  EXPECT_TRUE(torch::equal(slice_for_rank(whole, columns, 0, 2), whole.narrow(1, 0, 1)));
}

}  // namespace
}  // namespace kiln
