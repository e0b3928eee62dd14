// The CPU kernel behind Kiln's fused causal attention (core/layers/fused_attention.h), on raw
// float32 buffers. Each (batch, key/value head) is one task: its keys and values are packed once
// and serve every query head of its group (grouped-query attention). The upper triangle of the
// scores is never computed, the softmax runs in one pass over each row, and the backward pass
// recomputes the attention weights from q, k and each row's saved log-sum-exp, as flash
// attention does, rather than keeping a [time, time] matrix per head. Rotary position embeddings,
// when asked for, are applied to q and k as they are packed, and their transpose to dq and dk as
// they are written, so that rotated copies of q and k never exist as tensors.
#pragma once

#include <cstdint>

namespace kiln::attention_kernel {

// A [batch, time, heads * head_dim] tensor's rows: element (b, t, c) at
// data[b * batch_stride + t * row_stride + c].
template <class T>
struct Rows {
  T* data;
  int64_t batch_stride, row_stride;
};

struct Problem {
  // q: n_head heads side by side; k and v: n_kv_head heads, query head h reading key/value head
  // h / (n_head / n_kv_head).
  Rows<const float> q, k, v;
  int64_t batch, time, n_head, n_kv_head, head_dim;
  // [batch, time]: each token's position in its document, for packed rows
  // (core/layers/document_positions.h); null = each row one document, positions 0 .. time - 1.
  const int64_t* positions = nullptr;
  // [time, head_dim / 2]: cos and sin of position x inverse frequency, indexed by position; q and
  // k are rotated by them as core/layers/rotary.h's apply_rotary does. Null = no rotation.
  const float* cos = nullptr;
  const float* sin = nullptr;
};

// y [batch, time, n_head * head_dim] and lse [batch, n_head, time], the log-sum-exp of each
// query's scaled scores, which backward() needs.
void forward(const Problem& problem, Rows<float> y, float* lse);

// dq, dk and dv (laid out as q, k and v) from forward()'s y and lse and the gradient dy.
void backward(const Problem& problem, Rows<const float> y, Rows<const float> dy, const float* lse,
              Rows<float> dq, Rows<float> dk, Rows<float> dv);

}  // namespace kiln::attention_kernel
