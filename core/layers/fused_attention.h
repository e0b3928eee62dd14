// Causal self-attention as one CPU kernel with its own backward pass (model.kernels = "fused"),
// core/kernels/attention_kernel.h. gpt's reads q, k and v straight out of the qkv projection's
// [batch, time, 3 * n_embd] output; llama's takes its separate q, k and v projections, with as
// many or fewer key/value heads than query heads, and rotates q and k inside the kernel. Both
// write [batch, time, heads * head_dim], heads side by side, ready for the output projection: the
// head split, transposes and copies of LibTorch's op sequence disappear, and so do llama's
// rotated copies of q and k and its repeated key/value heads.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "core/layers/random_draws.h"

namespace kiln {

// Whether the fused kernel serves this call: float32 CPU tensors (so never a GPU, nor bfloat16
// autocast), and no attention dropout while training (its masks are core/layers/dropout.h's). On
// the CPU it is 1-3% faster a step than LibTorch 2.15's scaled_dot_product_attention, which the
// other calls take (docs/benchmarks.md).
bool fused_attention_applies(const at::Tensor& qkv, double dropout, bool training);

// Causal self-attention of `qkv` = [batch, time, 3 * n_embd] (q, k and v side by side, each
// n_head heads of n_embd / n_head) -> [batch, time, n_embd], each query within its document in
// packed rows (core/layers/document_positions.h). With `fused`, Kiln's kernel where
// fused_attention_applies() holds; otherwise core/layers/dropout.h's causal_attention, its dropout
// drawn at `site`, `heads` placing these heads among the model's (tensor parallelism).
at::Tensor causal_self_attention(const at::Tensor& qkv, int64_t n_head, double dropout,
                                 bool training, bool fused, int64_t site,
                                 const SliceOf& heads = {});

// Llama's attention: q [batch, time, n_head * head_dim], k and v [batch, time, n_kv_head *
// head_dim]; q and k rotated by `inv_freq` (core/layers/rotary.h) at the tokens' positions; query
// head h reads key/value head h / (n_head / n_kv_head) -> [batch, time, n_head * head_dim]. With
// `fused`, Kiln's kernel where fused_attention_applies() holds; otherwise apply_rotary, the
// key/value heads repeated, and causal_attention as above.
at::Tensor rotary_self_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 int64_t n_head, const at::Tensor& inv_freq, double dropout,
                                 bool training, bool fused, int64_t site,
                                 const SliceOf& heads = {});

// The fused kernels alone, without dropout, for float32 CPU tensors on any LibTorch (tests).
// `positions` (int64 [batch, time]) keeps each query inside its document in packed rows
// (core/layers/document_positions.h); undefined = each row one document.
at::Tensor fused_causal_attention(const at::Tensor& qkv, int64_t n_head,
                                  const at::Tensor& positions = {});
at::Tensor fused_rotary_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  int64_t n_head, const at::Tensor& inv_freq,
                                  const at::Tensor& positions = {});

}  // namespace kiln
