#include "core/kernels/attention_kernel.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/Parallel.h>

#include "core/kernels/float_vectors.h"

namespace kiln::attention_kernel {
namespace {

using namespace simd;  // the vector helpers are this file's vocabulary

constexpr int64_t kRows = 8;  // query rows per block: each key loaded serves this many
static_assert(kLanes % kRows == 0, "a block of rows never runs past the padded rows");

int64_t round_up(int64_t n) {
  return (n + kLanes - 1) / kLanes * kLanes;
}

// One head's rows in a [batch, time, heads * head_dim] buffer, `stride` floats apart.
template <class T>
struct Slice {
  T* data;
  int64_t stride;
  T* row(int64_t t) const { return data + t * stride; }
};

template <class T>
Slice<T> slice(Rows<T> rows, int64_t batch, int64_t column) {
  return {rows.data + batch * rows.batch_stride + column, rows.row_stride};
}

// One task: a (batch, key/value head) with the first of its `group` query heads (the others
// follow, head_dim columns apart), and the padded sizes of the packed copies: `rows` x `cols`
// (time x head_dim, rounded up to whole vectors, zeros beyond), so that the loops below need no
// tails.
struct Head {
  Slice<const float> q, k, v;
  int64_t group, time, dim, rows, cols;
  float scale;               // 1 / sqrt(head_dim)
  const int64_t* positions;  // the row's token positions in packed rows, else null
  const float *cos, *sin;    // rotation tables [time, dim / 2], or null

  // The first key query t sees: its document's first token. Never decreases with t, so a block
  // of queries starts its keys at its first query's, rounded down to a whole vector: the blocks
  // of keys that belong to earlier documents only are skipped.
  int64_t first_key(int64_t t) const { return positions ? t - positions[t] : 0; }
  int64_t first_block_key(int64_t t) const { return first_key(t) / kLanes * kLanes; }
  int64_t position(int64_t t) const { return positions ? positions[t] : t; }
};

// dst[t][d] = scale * src row t, element d, turned by token t's angles when `rotate` and the
// head has a rotation (x cos + rotate_half(x) sin); zero-padded to h.rows x h.cols.
KILN_INLINE void pack_rows(const Head& h, Slice<const float> src, float scale, bool rotate,
                           float* dst) {
  const int64_t half = h.dim / 2;
  for (int64_t t = 0; t < h.time; ++t) {
    const float* x = src.row(t);
    float* out = dst + t * h.cols;
    if (rotate && h.cos) {
      const float *c = h.cos + h.position(t) * half, *s = h.sin + h.position(t) * half;
      for (int64_t d = 0; d < half; ++d) {
        out[d] = scale * (x[d] * c[d] - x[d + half] * s[d]);
        out[d + half] = scale * (x[d + half] * c[d] + x[d] * s[d]);
      }
    } else {
      for (int64_t d = 0; d < h.dim; ++d)
        out[d] = scale * x[d];
    }
    std::fill(out + h.dim, out + h.cols, 0.0f);
  }
  std::fill(dst + h.time * h.cols, dst + h.rows * h.cols, 0.0f);
}

// dst row t = scale * src (a packed row), turned back by token t's angles (the rotation's
// transpose) when `rotate` and the head has a rotation: the gradient of pack_rows.
KILN_INLINE void unpack_row(const Head& h, const float* src, float scale, bool rotate, int64_t t,
                            float* dst) {
  if (!rotate || !h.cos) {
    for (int64_t d = 0; d < h.dim; ++d)
      dst[d] = scale * src[d];
    return;
  }
  const int64_t half = h.dim / 2;
  const float *c = h.cos + h.position(t) * half, *s = h.sin + h.position(t) * half;
  for (int64_t d = 0; d < half; ++d) {
    dst[d] = scale * (src[d] * c[d] + src[d + half] * s[d]);
    dst[d + half] = scale * (src[d + half] * c[d] - src[d] * s[d]);
  }
}

// dst[d][t] = src row t, element d, zero-padded to head.cols x head.rows.
KILN_INLINE void pack_columns(const Head& h, Slice<const float> src, float* dst) {
  for (int64_t d = 0; d < h.dim; ++d) {
    for (int64_t t = 0; t < h.time; ++t)
      dst[d * h.rows + t] = src.row(t)[d];
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

// Buffers of one thread, carved from one allocation: packed q (scaled; the rotated k rows first,
// on their way to k^T), k^T and v, a block of scores and one of outputs.
struct ForwardScratch {
  std::vector<float> memory;
  float *q, *k_columns, *v, *scores, *out;

  explicit ForwardScratch(const Head& h) : memory(3 * h.rows * h.cols + kRows * (h.rows + h.cols)) {
    q = memory.data(), k_columns = q + h.rows * h.cols, v = k_columns + h.rows * h.cols;
    scores = v + h.rows * h.cols, out = scores + kRows * h.rows;
  }
};

// The group's y rows and the log-sum-exp of each row's scaled scores (`lse`: the first query
// head's, h.time per head).
KILN_ISA_CLONES void head_forward(const Head& h, ForwardScratch& s, Slice<float> y, float* lse) {
  pack_rows(h, h.k, 1.0f, /*rotate=*/true, s.q);
  pack_columns(h, {s.q, h.cols}, s.k_columns);
  pack_rows(h, h.v, 1.0f, /*rotate=*/false, s.v);
  for (int64_t g = 0; g < h.group; ++g, lse += h.time) {
    pack_rows(h, {h.q.data + g * h.dim, h.q.stride}, h.scale, /*rotate=*/true, s.q);
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
        float* dst = y.row(first + r) + g * h.dim;
        for (int64_t d = 0; d < h.dim; ++d)
          dst[d] = s.out[r * h.cols + d] * normalise[r];
      }
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

// Where one task's gradients go: its query heads' dq, its key/value head's dk and dv.
struct Gradients {
  Slice<float> dq, dk, dv;
};

// Writes the group's dq, dk and dv from y, dy and lse (the first query head's, as in
// head_forward). With S the scaled scores, P = e^(S - lse) recomputed: dV = P^T dY, dP = dY V^T,
// dS = P * (dP - rowsum(dY * Y)), dQ = dS K scale, dK = dS^T (Q scale), summed over the group's
// query heads for dK and dV; dQ and dK turned back by the rotation's transpose.
KILN_ISA_CLONES void head_backward(const Head& h, BackwardScratch& s, Slice<const float> y,
                                   Slice<const float> dy, const float* lse, const Gradients& out) {
  pack_rows(h, h.k, 1.0f, /*rotate=*/true, s.k);
  pack_columns(h, {s.k, h.cols}, s.k_columns);
  pack_columns(h, h.v, s.v_columns);
  std::fill(s.dk, s.dk + 2 * h.rows * h.cols, 0.0f);  // dk and dv
  for (int64_t g = 0; g < h.group; ++g, lse += h.time) {
    const int64_t column = g * h.dim;
    pack_rows(h, {h.q.data + column, h.q.stride}, h.scale, /*rotate=*/true, s.q);
    pack_rows(h, {dy.data + column, dy.stride}, 1.0f, /*rotate=*/false, s.dy);
    for (int64_t t = 0; t < h.time; ++t)
      s.dy_y[t] = dot(dy.row(t) + column, y.row(t) + column, h.dim);
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
      for (int64_t r = 0; r < kRows && first + r < h.time; ++r)
        unpack_row(h, s.out + r * h.cols, h.scale, /*rotate=*/true, first + r,
                   out.dq.row(first + r) + column);
      add_weights_transposed_times_block(h, s.dp, s.q + first * h.cols, from, keys, s.dk);
      add_weights_transposed_times_block(h, s.p, s.dy + first * h.cols, from, keys, s.dv);
    }
  }
  for (int64_t t = 0; t < h.time; ++t) {
    unpack_row(h, s.dk + t * h.cols, 1.0f, /*rotate=*/true, t, out.dk.row(t));
    unpack_row(h, s.dv + t * h.cols, 1.0f, /*rotate=*/false, t, out.dv.row(t));
  }
}

// Batch `batch`, key/value head `kv`, and the first query head of its group.
Head head_of(const Problem& p, int64_t batch, int64_t kv) {
  const int64_t group = p.n_head / p.n_kv_head, dim = p.head_dim;
  return {slice(p.q, batch, kv * group * dim),
          slice(p.k, batch, kv * dim),
          slice(p.v, batch, kv * dim),
          group,
          p.time,
          dim,
          round_up(p.time),
          round_up(dim),
          static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim))),
          p.positions ? p.positions + batch * p.time : nullptr,
          p.cos,
          p.sin};
}

// Runs `body(head, batch, first query head, scratch)` for every (batch, key/value head) in
// parallel, on LibTorch's threads.
template <class Scratch, class Body>
void for_each_head(const Problem& p, const Body& body) {
  at::parallel_for(0, p.batch * p.n_kv_head, 1, [&](int64_t begin, int64_t end) {
    Scratch scratch(head_of(p, 0, 0));
    for (int64_t index = begin; index < end; ++index) {
      const int64_t batch = index / p.n_kv_head, kv = index % p.n_kv_head;
      const Head h = head_of(p, batch, kv);
      body(h, batch, kv * h.group, scratch);
    }
  });
}

}  // namespace

void forward(const Problem& p, Rows<float> y, float* lse) {
  for_each_head<ForwardScratch>(
      p, [&](const Head& h, int64_t batch, int64_t head, ForwardScratch& scratch) {
        head_forward(h, scratch, slice(y, batch, head * h.dim),
                     lse + (batch * p.n_head + head) * p.time);
      });
}

void backward(const Problem& p, Rows<const float> y, Rows<const float> dy, const float* lse,
              Rows<float> dq, Rows<float> dk, Rows<float> dv) {
  for_each_head<BackwardScratch>(
      p, [&](const Head& h, int64_t batch, int64_t head, BackwardScratch& scratch) {
        const int64_t column = head * h.dim, kv_column = head / h.group * h.dim;
        head_backward(
            h, scratch, slice(y, batch, column), slice(dy, batch, column),
            lse + (batch * p.n_head + head) * p.time,
            {slice(dq, batch, column), slice(dk, batch, kv_column), slice(dv, batch, kv_column)});
      });
}

}  // namespace kiln::attention_kernel
