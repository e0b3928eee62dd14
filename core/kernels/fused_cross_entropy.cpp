#include "core/kernels/fused_cross_entropy.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include "core/kernels/float_vectors.h"

namespace kiln {
namespace {

using simd::Floats;
using simd::kLanes;
using simd::load;
using simd::splat;
using simd::store;
using simd::sum_lanes;

// The sum of e^(row[j] - shift) for j < n, with shift >= every row[j].
KILN_INLINE float sum_exp(const float* row, int64_t n, float shift) {
  const Floats s = splat(shift);
  Floats sums = splat(0);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    sums += simd::exp_nonpositive(load(row + j) - s);
  float total = sum_lanes(sums);
  if (j < n) {
    float tail[kLanes];
    std::fill(tail, tail + kLanes, shift);
    std::memcpy(tail, row + j, sizeof(float) * (n - j));
    store(tail, simd::exp_nonpositive(load(tail) - s));
    for (int64_t i = 0; j + i < n; ++i)
      total += tail[i];
  }
  return total;
}

// Rows [begin, end) of logits x (row r at x + r * stride, v wide): each counted row's max and the
// log of its sum of e^(x - max), kept for backward, and its loss, their sum - x[target]; a skipped
// row's loss is 0. The log-sum-exp stays in two parts: x - max is exact, while x - (max + log sum)
// would round at max's magnitude.
KILN_ISA_CLONES void forward_rows(const float* x, int64_t stride, int64_t v, const int64_t* targets,
                                  int64_t ignore, float* maxes, float* log_sums, float* loss,
                                  int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const float* row = x + r * stride;
    if (targets[r] == ignore) {
      maxes[r] = log_sums[r] = loss[r] = 0;
      continue;
    }
    maxes[r] = simd::max_of(row, v);
    log_sums[r] = std::log(sum_exp(row, v, maxes[r]));
    loss[r] = (maxes[r] - row[targets[r]]) + log_sums[r];
  }
}

// Backward over rows [begin, end): dx = scale (e^(x - max - log sum) - one-hot(target)), zero for
// a skipped row.
KILN_ISA_CLONES void backward_rows(const float* x, int64_t stride, int64_t v,
                                   const int64_t* targets, int64_t ignore, const float* maxes,
                                   const float* log_sums, float scale, float* dx, int64_t begin,
                                   int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const float* row = x + r * stride;
    float* out = dx + r * v;
    if (targets[r] == ignore) {
      std::fill(out, out + v, 0.0f);
      continue;
    }
    const Floats max = splat(maxes[r]), log_sum = splat(log_sums[r]), factor = splat(scale);
    int64_t j = 0;
    for (; j + kLanes <= v; j += kLanes)
      store(out + j, simd::exp_nonpositive((load(row + j) - max) - log_sum) * factor);
    for (; j < v; ++j)
      out[j] = std::exp((row[j] - maxes[r]) - log_sums[r]) * scale;
    out[targets[r]] -= scale;
  }
}

// Rows per task: about 32k elements.
int64_t grain_for(int64_t v) {
  return std::max<int64_t>(1, 32768 / v);
}

struct FusedCrossEntropy : torch::autograd::Function<FusedCrossEntropy> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& targets_in, int64_t ignore, bool sum) {
    const at::Tensor targets = targets_in.contiguous();
    const int64_t rows = logits.size(0), v = logits.size(1);
    const at::Tensor counted = targets.ne(ignore);
    const at::Tensor outside = counted.logical_and(targets.lt(0).logical_or(targets.ge(v)));
    if (outside.any().item<bool>()) {
      TORCH_CHECK(false, "Target ", targets.masked_select(outside)[0].item<int64_t>(),
                  " is out of bounds.");
    }
    at::Tensor maxes = at::empty({rows}, logits.options());
    at::Tensor log_sums = at::empty({rows}, logits.options());
    at::Tensor losses = at::empty({rows}, logits.options());
    at::parallel_for(0, rows, grain_for(v), [&](int64_t begin, int64_t end) {
      forward_rows(logits.data_ptr<float>(), logits.stride(0), v, targets.data_ptr<int64_t>(),
                   ignore, maxes.data_ptr<float>(), log_sums.data_ptr<float>(),
                   losses.data_ptr<float>(), begin, end);
    });
    const int64_t count = counted.sum().item<int64_t>();
    ctx->save_for_backward({logits, targets, maxes, log_sums});
    ctx->saved_data["ignore"] = ignore;
    ctx->saved_data["divisor"] = sum ? 1.0 : static_cast<double>(count);
    at::Tensor total = losses.to(at::kDouble).sum();
    return (sum ? total : total / static_cast<double>(count)).to(at::kFloat);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &targets = saved[1], &maxes = saved[2],
                     &log_sums = saved[3];
    const int64_t rows = logits.size(0), v = logits.size(1);
    const int64_t ignore = ctx->saved_data["ignore"].toInt();
    const float scale =
        static_cast<float>(grads[0].item<double>() / ctx->saved_data["divisor"].toDouble());
    at::Tensor dx = at::empty({rows, v}, logits.options());
    at::parallel_for(0, rows, grain_for(v), [&](int64_t begin, int64_t end) {
      backward_rows(logits.data_ptr<float>(), logits.stride(0), v, targets.data_ptr<int64_t>(),
                    ignore, maxes.data_ptr<float>(), log_sums.data_ptr<float>(), scale,
                    dx.data_ptr<float>(), begin, end);
    });
    return {dx, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool fused_cross_entropy_applies(const at::Tensor& logits, const at::Tensor& targets) {
  return logits.device().is_cpu() && logits.layout() == at::kStrided &&
         logits.scalar_type() == at::kFloat && logits.dim() == 2 && logits.stride(1) == 1 &&
         logits.size(1) > 0 && targets.device().is_cpu() && targets.scalar_type() == at::kLong &&
         targets.dim() == 1 && targets.size(0) == logits.size(0);
}

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore,
                         bool sum, bool fused) {
  if (fused && fused_cross_entropy_applies(logits, targets))
    return FusedCrossEntropy::apply(logits, targets, ignore, sum);
  return at::cross_entropy_loss(logits, targets, {}, sum ? at::Reduction::Sum : at::Reduction::Mean,
                                ignore);
}

}  // namespace kiln
