#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/layers/fused_attention.h"
#include "kernel_parity.h"
#include "tensor_compare.h"

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

using testing::max_difference;

struct Shape {
  int64_t batch, time, n_head, head_dim;
};

// A non-contiguous [batch, time, 3 width] view of a leaf: rows padded by a few columns, or (with
// `columns_strided`) the transpose of a [batch, 3 width, time] tensor.
at::Tensor leaf_for(const Shape& c, bool columns_strided) {
  const int64_t width = 3 * c.n_head * c.head_dim;
  return columns_strided ? at::randn({c.batch, width, c.time}).requires_grad_()
                         : at::randn({c.batch, c.time, width + 5}).requires_grad_();
}
at::Tensor qkv_of(const at::Tensor& leaf, const Shape& c, bool columns_strided) {
  const int64_t width = 3 * c.n_head * c.head_dim;
  return columns_strided ? leaf.transpose(1, 2) : leaf.narrow(2, 2, width);
}

TEST(FusedAttention, OutputAndGradientsMatchTheTextbookInDoublePrecision) {
  const std::vector<Shape> cases = {{3, 1, 2, 32},  {3, 7, 3, 32},  {3, 64, 4, 32}, {3, 130, 2, 32},
                                    {3, 1, 4, 64},  {3, 7, 2, 64},  {3, 64, 3, 64}, {3, 130, 4, 64},
                                    {2, 19, 3, 13}, {2, 33, 2, 128}};
  for (size_t n = 0; n < cases.size(); ++n) {
    const Shape& c = cases[n];
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

// Llama's attention written out here in double precision: q and k turned by the rotary
// embedding's definition (each head's first half against its second, by angles position x
// inverse frequency, the angles formed in float32 as Hugging Face forms them), each query head
// reading key/value head h / group, and query t seeing keys t - positions[t] .. t.
at::Tensor rotate(const at::Tensor& x, const at::Tensor& inv_freq, const at::Tensor& positions) {
  const int64_t half = x.size(3) / 2;
  auto angles = (positions.to(at::kFloat).unsqueeze(-1) * inv_freq).to(at::kDouble).unsqueeze(2);
  auto x1 = x.narrow(3, 0, half), x2 = x.narrow(3, half, half);
  return at::cat({x1 * angles.cos() - x2 * angles.sin(), x2 * angles.cos() + x1 * angles.sin()}, 3);
}

at::Tensor reference_rotary_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      int64_t n_head, const at::Tensor& inv_freq,
                                      const at::Tensor& positions) {
  const int64_t b = q.size(0), t = q.size(1), d = q.size(2) / n_head, kv = k.size(2) / d;
  auto heads = [&](const at::Tensor& x, int64_t n) { return x.reshape({b, t, n, d}); };
  auto rq = rotate(heads(q, n_head), inv_freq, positions).permute({0, 2, 1, 3});
  auto rk = rotate(heads(k, kv), inv_freq, positions).repeat_interleave(n_head / kv, 2);
  auto rv = heads(v, kv).repeat_interleave(n_head / kv, 2);
  auto scores = at::matmul(rq, rk.permute({0, 2, 3, 1})) / std::sqrt(double(d));
  auto query = at::arange(t).view({1, t, 1}), key = at::arange(t).view({1, 1, t});
  auto unseen = (key > query).logical_or(key < query - positions.unsqueeze(-1)).unsqueeze(1);
  auto weights = at::softmax(scores.masked_fill(unseen, -INFINITY), -1);
  return at::matmul(weights, rv.permute({0, 2, 1, 3})).permute({0, 2, 1, 3}).reshape({b, t, -1});
}

struct RotaryCase {
  int64_t batch, time, n_head, n_kv_head, head_dim;
  bool packed;  // rows of several documents
};

TEST(FusedAttention, RotaryGroupedQueryOutputAndGradientsMatchTheDefinitionInDoublePrecision) {
  const std::vector<RotaryCase> cases = {{2, 1, 2, 2, 32, false},  {2, 7, 4, 2, 14, false},
                                         {3, 19, 6, 2, 26, true},  {2, 64, 3, 1, 64, false},
                                         {2, 130, 4, 4, 32, true}, {1, 33, 6, 3, 128, true}};
  for (size_t n = 0; n < cases.size(); ++n) {
    const RotaryCase& c = cases[n];
    SCOPED_TRACE("case " + std::to_string(n));
    torch::manual_seed(static_cast<uint64_t>(n));
    // q column-strided (the transpose of a [batch, width, time] leaf), k and v plain.
    at::Tensor q_leaf = at::randn({c.batch, c.n_head * c.head_dim, c.time}).requires_grad_();
    at::Tensor k = at::randn({c.batch, c.time, c.n_kv_head * c.head_dim}).requires_grad_();
    at::Tensor v = at::randn({c.batch, c.time, c.n_kv_head * c.head_dim}).requires_grad_();
    at::Tensor inv_freq =
        at::pow(10000.0, -at::arange(0, c.head_dim, 2, at::kDouble) / c.head_dim).to(at::kFloat);
    at::Tensor positions = at::arange(c.time).expand({c.batch, c.time}).contiguous();
    for (int64_t row = 0; c.packed && row < c.batch; ++row)  // documents of 5, 11, 17 tokens
      positions[row] = at::arange(c.time) % (5 + 6 * row);
    at::Tensor upstream = at::randn({c.batch, c.time, c.n_head * c.head_dim});

    at::Tensor y = fused_rotary_attention(q_leaf.transpose(1, 2), k, v, c.n_head, inv_freq,
                                          c.packed ? positions : at::Tensor());
    (y * upstream).sum().backward();

    auto q64 = q_leaf.detach().to(at::kDouble).requires_grad_();
    auto k64 = k.detach().to(at::kDouble).requires_grad_();
    auto v64 = v.detach().to(at::kDouble).requires_grad_();
    at::Tensor want =
        reference_rotary_attention(q64.transpose(1, 2), k64, v64, c.n_head, inv_freq, positions);
    (want * upstream.to(at::kDouble)).sum().backward();

    EXPECT_LT(max_difference(y, want), 1e-5);
    EXPECT_LT(max_difference(q_leaf.grad(), q64.grad()), 1e-5);
    EXPECT_LT(max_difference(k.grad(), k64.grad()), 1e-5);
    EXPECT_LT(max_difference(v.grad(), v64.grad()), 1e-5);
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

TEST(FusedAttention, LlamaWithGroupedQueriesAndQkNormMatchesLibTorchsOps) {
  testing::expect_fused_kernels_match_torch(
      "llama", {"model.n_layer=2", "model.n_head=6", "model.n_kv_head=2", "model.n_embd=84",
                "model.ffn_dim=52", "model.block_size=24", "model.qk_norm=true"});
}

TEST(FusedAttention, GptLossAndGradientsMatchLibTorchsOps) {
  testing::expect_fused_kernels_match_torch(
      "gpt", {"model.n_layer=2", "model.n_head=2", "model.n_embd=64", "model.block_size=24"});
}

}  // namespace
}  // namespace kiln
