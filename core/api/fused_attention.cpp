#include "core/api/fused_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include "core/api/document_positions.h"
#include "core/api/dropout.h"
#include "core/util/float_vectors.h"
#include "core/util/torch_compat.h"

namespace kiln {
namespace {

using namespace simd;  // the vector helpers are this file's vocabulary

constexpr int64_t kRows = 8;  // query rows per block: each key loaded serves this many
static_assert(kLanes % kRows == 0, "a block of rows never runs past the padded rows");

int64_t round_up(int64_t n) {
  return (n + kLanes - 1) / kLanes * kLanes;
}

// One (batch, head) in qkv, whose rows are `stride` floats apart (k at +width, v at +2 width
// from q), and the padded sizes of its packed copies: `rows` x `cols` (time x head_dim, rounded
// up to whole vectors, zeros beyond), so that the loops below need no tails. `positions`: the
// row's token positions when it packs documents (core/api/document_positions.h), else null.
struct Head {
  const float* q;
  int64_t stride, width, time, dim, rows, cols;
  float scale;  // 1 / sqrt(head_dim)
  const int64_t* positions;

  const float* k() const { return q + width; }
  const float* v() const { return q + 2 * width; }
  // The first key query t sees: its document's first token. Never decreases with t, so a block
  // of queries starts its keys at its first query's, rounded down to a whole vector: the blocks
  // of keys that belong to earlier documents only are skipped.
  int64_t first_key(int64_t t) const { return positions ? t - positions[t] : 0; }
  int64_t first_block_key(int64_t t) const { return first_key(t) / kLanes * kLanes; }
};

// dst[t][d] = scale * src[t * stride + d], zero-padded to head.rows x head.cols.
KILN_INLINE void pack_rows(const Head& h, const float* src, int64_t stride, float scale,
                           float* dst) {
  for (int64_t t = 0; t < h.time; ++t) {
    for (int64_t d = 0; d < h.dim; ++d)
      dst[t * h.cols + d] = scale * src[t * stride + d];
    std::fill(dst + t * h.cols + h.dim, dst + (t + 1) * h.cols, 0.0f);
  }
  std::fill(dst + h.time * h.cols, dst + h.rows * h.cols, 0.0f);
}

// dst[d][t] = src[t * stride + d], zero-padded to head.cols x head.rows.
KILN_INLINE void pack_columns(const Head& h, const float* src, float* dst) {
  for (int64_t d = 0; d < h.dim; ++d) {
    for (int64_t t = 0; t < h.time; ++t)
      dst[d * h.rows + t] = src[t * h.stride + d];
    std::fill(dst + d * h.rows + h.time, dst + (d + 1) * h.rows, 0.0f);
  }
  std::fill(dst + h.dim * h.rows, dst + h.cols * h.rows, 0.0f);
}

// out[r][j] = block[r] . columns[., j] for the kRows rows of `block` (each h.cols long) and
// keys from <= j < n (in whole vectors; `from` is one's first); `columns` is h.cols x h.rows,
// out kRows x h.rows.
KILN_INLINE void block_times_columns(const Head& h, const float* block, const float* columns,
                                     int64_t from, int64_t n, float* out) {
  for (int64_t j = from; j < n; j += kLanes) {
    Floats acc[kRows] = {};
    for (int64_t d = 0; d < h.cols; ++d) {
      const Floats c = load(columns + d * h.rows + j);
      for (int64_t r = 0; r < kRows; ++r)
        acc[r] += block[r * h.cols + d] * c;
    }
    for (int64_t r = 0; r < kRows; ++r)
      store(out + r * h.rows + j, acc[r]);
  }
}

// out[r] = sum over from <= j < n of weights[r][j] rows[j]: weights kRows x h.rows, rows and out
// h.cols wide.
KILN_INLINE void weights_times_rows(const Head& h, const float* weights, const float* rows,
                                    int64_t from, int64_t n, float* out) {
  for (int64_t c = 0; c < h.cols; c += kLanes) {
    Floats acc[kRows] = {};
    for (int64_t j = from; j < n; ++j) {
      const Floats x = load(rows + j * h.cols + c);
      for (int64_t r = 0; r < kRows; ++r)
        acc[r] += weights[r * h.rows + j] * x;
    }
    for (int64_t r = 0; r < kRows; ++r)
      store(out + r * h.cols + c, acc[r]);
  }
}

// sums[j] += sum over r of weights[r][j] block[r], for from <= j < n: the transpose of the above.
KILN_INLINE void add_weights_transposed_times_block(const Head& h, const float* weights,
                                                    const float* block, int64_t from, int64_t n,
                                                    float* sums) {
  for (int64_t c = 0; c < h.cols; c += kLanes) {
    Floats x[kRows];
    for (int64_t r = 0; r < kRows; ++r)
      x[r] = load(block + r * h.cols + c);
    for (int64_t j = from; j < n; ++j) {
      Floats sum = load(sums + j * h.cols + c);
      for (int64_t r = 0; r < kRows; ++r)
        sum += weights[r * h.rows + j] * x[r];
      store(sums + j * h.cols + c, sum);
    }
  }
}

// Zeroes the weights of the block's keys [from, padded) that query t does not see: those of
// earlier documents and those after t (causality); all of them for a padding row past the last
// query.
KILN_INLINE void clear_unseen(const Head& h, float* row, int64_t t, int64_t from, int64_t padded) {
  if (t >= h.time) {
    std::fill(row + from, row + padded, 0.0f);
    return;
  }
  std::fill(row + from, row + h.first_key(t), 0.0f);
  std::fill(row + t + 1, row + padded, 0.0f);
}

// Buffers of one thread, carved from one allocation: packed q (scaled), k^T and v, a block of
// scores and one of outputs.
struct ForwardScratch {
  std::vector<float> memory;
  float *q, *k_columns, *v, *scores, *out;

  explicit ForwardScratch(const Head& h) : memory(3 * h.rows * h.cols + kRows * (h.rows + h.cols)) {
    q = memory.data(), k_columns = q + h.rows * h.cols, v = k_columns + h.rows * h.cols;
    scores = v + h.rows * h.cols, out = scores + kRows * h.rows;
  }
};

// One head's y rows (`width` apart) and the log-sum-exp of each row's scaled scores.
KILN_ISA_CLONES void head_forward(const Head& h, ForwardScratch& s, float* y, float* lse) {
  pack_rows(h, h.q, h.stride, h.scale, s.q);
  pack_columns(h, h.k(), s.k_columns);
  pack_rows(h, h.v(), h.stride, 1.0f, s.v);
  for (int64_t first = 0; first < h.time; first += kRows) {
    const int64_t keys = std::min(first + kRows, h.time), padded = round_up(keys);
    const int64_t from = h.first_block_key(first);
    block_times_columns(h, s.q + first * h.cols, s.k_columns, from, keys, s.scores);
    float normalise[kRows] = {};
    for (int64_t r = 0; r < kRows; ++r) {
      float* row = s.scores + r * h.rows;
      const int64_t t = first + r;
      if (t < h.time) {  // keys first_key(t) .. t
        const int64_t lo = h.first_key(t);
        const float max = max_of(row + lo, t + 1 - lo);
        const float sum = exp_shifted(row + lo, t + 1 - lo, max);
        normalise[r] = 1.0f / sum;
        lse[t] = max + std::log(sum);
      }
      clear_unseen(h, row, t, from, padded);
    }
    weights_times_rows(h, s.scores, s.v, from, keys, s.out);
    for (int64_t r = 0; r < kRows && first + r < h.time; ++r) {
      for (int64_t d = 0; d < h.dim; ++d)
        y[(first + r) * h.width + d] = s.out[r * h.cols + d] * normalise[r];
    }
  }
}

// The backward pass's buffers: packed q (scaled), k, k^T, v^T and dy, the sums of dk and dv,
// blocks of P, dP and outputs, and each row's dy . y.
struct BackwardScratch {
  std::vector<float> memory;
  float *q, *k, *k_columns, *v_columns, *dy, *dk, *dv, *p, *dp, *out, *dy_y;

  explicit BackwardScratch(const Head& h)
      : memory(7 * h.rows * h.cols + kRows * (2 * h.rows + h.cols) + h.rows) {
    const int64_t panel = h.rows * h.cols;
    q = memory.data(), k = q + panel, k_columns = k + panel, v_columns = k_columns + panel;
    dy = v_columns + panel, dk = dy + panel, dv = dk + panel, p = dv + panel;
    dp = p + kRows * h.rows, out = dp + kRows * h.rows, dy_y = out + kRows * h.cols;
  }
};

// Writes one head's dq, dk and dv into `grad` rows (3 width apart) from y, dy (width apart) and
// lse. With S the scaled scores, P = e^(S - lse) recomputed: dV = P^T dY, dP = dY V^T,
// dS = P * (dP - rowsum(dY * Y)), dQ = dS K scale, dK = dS^T (Q scale).
KILN_ISA_CLONES void head_backward(const Head& h, BackwardScratch& s, const float* y,
                                   const float* dy, const float* lse, float* grad) {
  pack_rows(h, h.q, h.stride, h.scale, s.q);
  pack_rows(h, h.k(), h.stride, 1.0f, s.k);
  pack_columns(h, h.k(), s.k_columns);
  pack_columns(h, h.v(), s.v_columns);
  pack_rows(h, dy, h.width, 1.0f, s.dy);
  std::fill(s.dk, s.dk + 2 * h.rows * h.cols, 0.0f);  // dk and dv
  for (int64_t t = 0; t < h.time; ++t)
    s.dy_y[t] = dot(dy + t * h.width, y + t * h.width, h.dim);
  const int64_t grad_stride = 3 * h.width;
  for (int64_t first = 0; first < h.time; first += kRows) {
    const int64_t keys = std::min(first + kRows, h.time), padded = round_up(keys);
    const int64_t from = h.first_block_key(first);
    block_times_columns(h, s.q + first * h.cols, s.k_columns, from, keys, s.p);
    block_times_columns(h, s.dy + first * h.cols, s.v_columns, from, keys, s.dp);
    for (int64_t r = 0; r < kRows; ++r) {
      float *p = s.p + r * h.rows, *dp = s.dp + r * h.rows;
      const int64_t t = first + r;
      if (t < h.time) {
        const int64_t lo = h.first_key(t);
        exp_shifted(p + lo, t + 1 - lo, lse[t]);
        for (int64_t j = lo; j <= t; ++j)
          dp[j] = p[j] * (dp[j] - s.dy_y[t]);  // dS, in place of dP
      }
      clear_unseen(h, p, t, from, padded);
      clear_unseen(h, dp, t, from, padded);
    }
    weights_times_rows(h, s.dp, s.k, from, keys, s.out);
    for (int64_t r = 0; r < kRows && first + r < h.time; ++r) {
      for (int64_t d = 0; d < h.dim; ++d)
        grad[(first + r) * grad_stride + d] = s.out[r * h.cols + d] * h.scale;
    }
    add_weights_transposed_times_block(h, s.dp, s.q + first * h.cols, from, keys, s.dk);
    add_weights_transposed_times_block(h, s.p, s.dy + first * h.cols, from, keys, s.dv);
  }
  for (int64_t t = 0; t < h.time; ++t) {
    for (int64_t d = 0; d < h.dim; ++d) {
      grad[t * grad_stride + h.width + d] = s.dk[t * h.cols + d];
      grad[t * grad_stride + 2 * h.width + d] = s.dv[t * h.cols + d];
    }
  }
}

struct Shape {
  int64_t batch, time, n_head, width;
  const int64_t* positions;  // [batch, time], or null: each row one document
};

Shape shape_of(const at::Tensor& qkv, int64_t n_head, const at::Tensor& positions) {
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * n_head) == 0,
              "fused attention wants [batch, time, 3 * n_head * head_dim], got ", qkv.sizes());
  TORCH_CHECK(qkv.scalar_type() == at::kFloat && qkv.device().is_cpu() && qkv.stride(2) == 1,
              "fused attention wants float32 CPU rows");
  if (positions.defined()) {
    TORCH_CHECK(positions.scalar_type() == at::kLong && positions.device().is_cpu() &&
                    positions.is_contiguous() && positions.dim() == 2 &&
                    positions.size(0) == qkv.size(0) && positions.size(1) == qkv.size(1),
                "fused attention wants int64 CPU positions [batch, time], got ", positions.sizes());
  }
  return {qkv.size(0), qkv.size(1), n_head, qkv.size(2) / 3,
          positions.defined() ? positions.data_ptr<int64_t>() : nullptr};
}

Head head_of(const at::Tensor& qkv, const Shape& s, int64_t batch, int64_t head) {
  const int64_t dim = s.width / s.n_head;
  return {qkv.data_ptr<float>() + batch * qkv.stride(0) + head * dim,
          qkv.stride(1),
          s.width,
          s.time,
          dim,
          round_up(s.time),
          round_up(dim),
          static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim))),
          s.positions ? s.positions + batch * s.time : nullptr};
}

// Runs `body(head, offset, scratch)` for every (batch, head) in parallel: `offset` is the head's
// first element in [batch, time, width] rows, lse's rows are batch * n_head + head.
template <class Scratch, class Body>
void for_each_head(const at::Tensor& qkv, const Shape& s, const Body& body) {
  at::parallel_for(0, s.batch * s.n_head, 1, [&](int64_t begin, int64_t end) {
    Scratch scratch(head_of(qkv, s, 0, 0));
    for (int64_t index = begin; index < end; ++index) {
      const int64_t batch = index / s.n_head, head = index % s.n_head;
      const Head h = head_of(qkv, s, batch, head);
      body(h, batch * s.time * s.width + head * h.dim, index * s.time, scratch);
    }
  });
}

// (y [batch, time, width], log-sum-exp [batch, n_head, time])
std::pair<at::Tensor, at::Tensor> attention_forward(const at::Tensor& qkv, int64_t n_head,
                                                    const at::Tensor& positions) {
  const Shape s = shape_of(qkv, n_head, positions);
  at::Tensor y = at::empty({s.batch, s.time, s.width}, qkv.options());
  at::Tensor lse = at::empty({s.batch, n_head, s.time}, qkv.options());
  float* y_data = y.data_ptr<float>();
  float* lse_data = lse.data_ptr<float>();
  for_each_head<ForwardScratch>(
      qkv, s, [&](const Head& h, int64_t offset, int64_t lse_offset, ForwardScratch& scratch) {
        head_forward(h, scratch, y_data + offset, lse_data + lse_offset);
      });
  return {y, lse};
}

at::Tensor attention_backward(const at::Tensor& qkv, const at::Tensor& y, const at::Tensor& lse,
                              const at::Tensor& dy, int64_t n_head, const at::Tensor& positions) {
  const Shape s = shape_of(qkv, n_head, positions);
  at::Tensor grad = at::empty({s.batch, s.time, 3 * s.width}, qkv.options());
  const float* y_data = y.data_ptr<float>();
  const float* dy_data = dy.data_ptr<float>();
  const float* lse_data = lse.data_ptr<float>();
  float* grad_data = grad.data_ptr<float>();
  for_each_head<BackwardScratch>(
      qkv, s, [&](const Head& h, int64_t offset, int64_t lse_offset, BackwardScratch& scratch) {
        const int64_t grad_offset = offset / s.width * 3 * s.width + offset % s.width;
        head_backward(h, scratch, y_data + offset, dy_data + offset, lse_data + lse_offset,
                      grad_data + grad_offset);
      });
  return grad;
}

// Packed rows' positions, or none: wrapped, because Function::apply takes no undefined tensor
// among its inputs, and they need no gradient.
struct Positions {
  at::Tensor tensor;
};

struct FusedAttention : torch::autograd::Function<FusedAttention> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv,
                            int64_t n_head, const Positions& positions) {
    // Rows need only be contiguous within themselves; a column-strided input is copied once.
    const at::Tensor rows = qkv.stride(2) == 1 ? qkv : qkv.contiguous();
    auto [y, lse] = attention_forward(rows, n_head, positions.tensor);
    ctx->save_for_backward({rows, y, lse, positions.tensor});
    ctx->saved_data["n_head"] = n_head;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const int64_t n_head = ctx->saved_data["n_head"].toInt();
    return {attention_backward(saved[0], saved[1], saved[2], grad_outputs[0].contiguous(), n_head,
                               saved[3]),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool fused_attention_applies(const at::Tensor& qkv, double dropout, bool training) {
#if KILN_TORCH_AT_LEAST(2, 0)
  (void)qkv, (void)dropout, (void)training;
  return false;  // not measured against scaled_dot_product_attention's CPU kernel yet
#else
  return qkv.device().is_cpu() && qkv.layout() == at::kStrided && qkv.scalar_type() == at::kFloat &&
         !(training && dropout > 0);
#endif
}

at::Tensor fused_causal_attention(const at::Tensor& qkv, int64_t n_head,
                                  const at::Tensor& positions) {
  return FusedAttention::apply(qkv, n_head,
                               Positions{positions.defined() ? positions.contiguous() : positions});
}

at::Tensor causal_self_attention(const at::Tensor& qkv, int64_t n_head, double dropout,
                                 bool training, bool fused, int64_t site, const SliceOf& heads) {
  if (fused && fused_attention_applies(qkv, dropout, training))
    return fused_causal_attention(qkv, n_head, current_positions());
  const int64_t b = qkv.size(0), t = qkv.size(1), c = qkv.size(2) / 3;
  auto split = [&](const at::Tensor& m) {
    return m.view({b, t, n_head, c / n_head}).transpose(1, 2);  // [b, heads, t, head_dim]
  };
  auto parts = qkv.split(c, 2);
  auto y = causal_attention(split(parts[0]), split(parts[1]), split(parts[2]), dropout, training,
                            site, heads);
  return y.transpose(1, 2).contiguous().view({b, t, c});
}

}  // namespace kiln
