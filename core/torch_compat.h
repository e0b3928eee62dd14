// The one place where LibTorch 1.13 (Debian, CPU) and LibTorch 2.x (PyTorch wheels, CUDA)
// differ for Kiln. Everything else calls these helpers instead of testing versions itself.
#pragma once

#include <cmath>

#include <ATen/ATen.h>
#include <torch/version.h>

namespace kiln::compat {

constexpr bool kHasFusedAttention = TORCH_VERSION_MAJOR >= 2;

// Causal self-attention over [batch, heads, time, head_dim] tensors. LibTorch 2 has
// scaled_dot_product_attention (flash / memory-efficient kernels on CUDA); 1.13 has not, so
// there it is computed the textbook way with an upper-triangular mask.
inline at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   double dropout, bool training) {
  const double p = training ? dropout : 0.0;
#if TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, p, /*is_causal=*/true);
#else
  const int64_t t = q.size(-2);
  auto scores = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(-1))));
  auto future = at::ones({t, t}, q.options().dtype(at::kBool)).triu(1);
  auto weights = at::softmax(scores.masked_fill(future, -INFINITY), -1);
  if (p > 0) weights = at::dropout(weights, p, /*train=*/true);
  return at::matmul(weights, v);
#endif
}

}  // namespace kiln::compat
