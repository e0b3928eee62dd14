#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/api/fused_attention.h"
#include "kernel_parity.h"

namespace kiln {
namespace {

// Causal self-attention written out here, as the textbook defines it, in double precision:
// per head, softmax over the earlier positions of q k^T / sqrt(head_dim), times v.
at::Tensor reference_attention(const at::Tensor& qkv, int64_t n_head) {
  const int64_t b = qkv.size(0), t = qkv.size(1), c = qkv.size(2) / 3, d = c / n_head;
  auto heads = [&](int64_t part) {
    return qkv.narrow(2, part * c, c).reshape({b, t, n_head, d}).permute({0, 2, 1, 3});
  };
  auto scores = at::matmul(heads(0), heads(1).transpose(-2, -1)) / std::sqrt(double(d));
  auto future = at::ones({t, t}, qkv.options().dtype(at::kBool)).triu(1);
  auto weights = at::softmax(scores.masked_fill(future, -INFINITY), -1);
  return at::matmul(weights, heads(2)).permute({0, 2, 1, 3}).reshape({b, t, c});
}

double max_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

struct Case {
  int64_t batch, time, n_head, head_dim;
};

// A non-contiguous [batch, time, 3 width] view of a leaf: rows padded by a few columns, or (with
// `columns_strided`) the transpose of a [batch, 3 width, time] tensor.
at::Tensor leaf_for(const Case& c, bool columns_strided) {
  const int64_t width = 3 * c.n_head * c.head_dim;
  return columns_strided ? at::randn({c.batch, width, c.time}).requires_grad_()
                         : at::randn({c.batch, c.time, width + 5}).requires_grad_();
}
at::Tensor qkv_of(const at::Tensor& leaf, const Case& c, bool columns_strided) {
  const int64_t width = 3 * c.n_head * c.head_dim;
  return columns_strided ? leaf.transpose(1, 2) : leaf.narrow(2, 2, width);
}

TEST(FusedAttention, OutputAndGradientsMatchTheTextbookInDoublePrecision) {
  const std::vector<Case> cases = {{3, 1, 2, 32},  {3, 7, 3, 32},  {3, 64, 4, 32}, {3, 130, 2, 32},
                                   {3, 1, 4, 64},  {3, 7, 2, 64},  {3, 64, 3, 64}, {3, 130, 4, 64},
                                   {2, 19, 3, 13}, {2, 33, 2, 128}};
  for (size_t n = 0; n < cases.size(); ++n) {
    const Case& c = cases[n];
    SCOPED_TRACE("batch " + std::to_string(c.batch) + " time " + std::to_string(c.time) +
                 " heads " + std::to_string(c.n_head) + " head_dim " + std::to_string(c.head_dim));
    torch::manual_seed(static_cast<uint64_t>(n));
    const bool columns_strided = n % 2 == 1;
    at::Tensor leaf = leaf_for(c, columns_strided);
    at::Tensor qkv = qkv_of(leaf, c, columns_strided);
    ASSERT_FALSE(qkv.is_contiguous());
    at::Tensor upstream = at::randn({c.batch, c.time, c.n_head * c.head_dim});

    at::Tensor y = fused_causal_attention(qkv, c.n_head);
    (y * upstream).sum().backward();

    at::Tensor leaf64 = leaf.detach().to(at::kDouble).requires_grad_();
    at::Tensor want = reference_attention(qkv_of(leaf64, c, columns_strided), c.n_head);
    (want * upstream.to(at::kDouble)).sum().backward();

    EXPECT_LT(max_difference(y, want), 1e-5);
    EXPECT_LT(max_difference(leaf.grad(), leaf64.grad()), 1e-5);
  }
}

TEST(FusedAttention, FallsBackToLibTorchsOpsForBfloat16AndTrainingDropout) {
  torch::manual_seed(0);
  at::Tensor qkv = at::randn({2, 9, 3 * 64});
  EXPECT_FALSE(fused_attention_applies(qkv.to(at::kBFloat16), 0.0, true));
  EXPECT_FALSE(fused_attention_applies(qkv, 0.1, /*training=*/true));

  // The same random draws as the op sequence: the dropout masks, so the results, are equal.
  torch::manual_seed(1);
  at::Tensor fused = causal_self_attention(qkv, 2, 0.5, true, /*fused=*/true, 0);
  torch::manual_seed(1);
  at::Tensor ops = causal_self_attention(qkv, 2, 0.5, true, /*fused=*/false, 0);
  EXPECT_TRUE(at::equal(fused, ops));
  at::Tensor half = qkv.to(at::kBFloat16);
  EXPECT_TRUE(at::equal(causal_self_attention(half, 2, 0.0, true, true, 0),
                        causal_self_attention(half, 2, 0.0, true, false, 0)));
}

TEST(FusedAttention, GptLossAndGradientsMatchLibTorchsOps) {
  if (!fused_attention_applies(at::zeros({1, 1, 3}), 0.0, true))
    GTEST_SKIP() << "this LibTorch keeps its own attention kernel: nothing to compare";
  testing::expect_fused_kernels_match_torch(
      "gpt", {"model.n_layer=2", "model.n_head=2", "model.n_embd=64", "model.block_size=24"});
}

}  // namespace
}  // namespace kiln
