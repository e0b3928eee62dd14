#include "core/kernels/fused_rms_norm.h"

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

// Rows [begin, end) of c elements: y = x s w with s = 1 / sqrt(mean(x^2) + eps), each row's s
// kept for backward.
KILN_ISA_CLONES void forward_rows(const float* x, const float* w, float* y, float* rstd, float eps,
                                  int64_t c, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * c;
    float* yr = y + r * c;
    Floats lanes = splat(0);
    int64_t j = 0;
    for (; j + kLanes <= c; j += kLanes) {
      const Floats v = load(xr + j);
      lanes += v * v;
    }
    float squares = sum_lanes(lanes);
    for (; j < c; ++j)
      squares += xr[j] * xr[j];
    const float s = 1.0f / std::sqrt(squares / static_cast<float>(c) + eps);
    for (j = 0; j + kLanes <= c; j += kLanes)
      store(yr + j, load(xr + j) * splat(s) * load(w + j));
    for (; j < c; ++j)
      yr[j] = xr[j] * s * w[j];
    rstd[r] = s;
  }
}

// Backward over rows [begin, end): with x^ = x s and g = dy w, dx = s (g - x^ mean(g x^)); dw
// (this thread's) adds dy x^.
KILN_ISA_CLONES void backward_rows(const float* x, const float* dy, const float* w,
                                   const float* rstd, float* dx, float* dw, int64_t c,
                                   int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const float *xr = x + r * c, *dyr = dy + r * c;
    float* dxr = dx + r * c;
    const float s = rstd[r];
    Floats lanes = splat(0);
    int64_t j = 0;
    for (; j + kLanes <= c; j += kLanes)
      lanes += load(dyr + j) * load(w + j) * load(xr + j) * splat(s);
    float gx_sum = sum_lanes(lanes);
    for (; j < c; ++j)
      gx_sum += dyr[j] * w[j] * xr[j] * s;
    const float gx_mean = gx_sum / static_cast<float>(c);
    for (j = 0; j + kLanes <= c; j += kLanes) {
      const Floats xhat = load(xr + j) * splat(s), d = load(dyr + j);
      store(dxr + j, splat(s) * (d * load(w + j) - xhat * splat(gx_mean)));
      store(dw + j, load(dw + j) + d * xhat);
    }
    for (; j < c; ++j) {
      const float xhat = xr[j] * s, d = dyr[j];
      dxr[j] = s * (d * w[j] - xhat * gx_mean);
      dw[j] += d * xhat;
    }
  }
}

// Rows per task: about 32k elements.
int64_t grain_for(int64_t c) {
  return std::max<int64_t>(1, 32768 / c);
}

struct FusedRmsNorm : torch::autograd::Function<FusedRmsNorm> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& gain, double eps) {
    const at::Tensor xs = x.contiguous(), w = gain.contiguous();
    const int64_t c = x.size(-1), rows = x.numel() / c;
    at::Tensor y = at::empty_like(xs), rstd = at::empty({rows}, xs.options());
    at::parallel_for(0, rows, grain_for(c), [&](int64_t begin, int64_t end) {
      forward_rows(xs.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(),
                   rstd.data_ptr<float>(), static_cast<float>(eps), c, begin, end);
    });
    ctx->save_for_backward({xs, w, rstd});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &rstd = saved[2];
    const at::Tensor dy = grads[0].contiguous();
    const int64_t c = x.size(-1), rows = x.numel() / c;
    at::Tensor dx = at::empty_like(x);
    // Each thread sums its rows' dw into its own row of this; the rows are added after.
    at::Tensor dw_parts = at::zeros({at::get_num_threads(), c}, x.options());
    at::parallel_for(0, rows, grain_for(c), [&](int64_t begin, int64_t end) {
      backward_rows(x.data_ptr<float>(), dy.data_ptr<float>(), w.data_ptr<float>(),
                    rstd.data_ptr<float>(), dx.data_ptr<float>(),
                    dw_parts[at::get_thread_num()].data_ptr<float>(), c, begin, end);
    });
    return {dx, dw_parts.sum(0), at::Tensor()};
  }
};

}  // namespace

bool fused_rms_norm_applies(const at::Tensor& x, const at::Tensor& gain) {
  for (const at::Tensor* t : {&x, &gain}) {
    if (!t->device().is_cpu() || t->layout() != at::kStrided || t->scalar_type() != at::kFloat)
      return false;
  }
  return gain.dim() == 1 && gain.size(0) == x.size(-1);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& gain, double eps, bool fused) {
  if (fused && fused_rms_norm_applies(x, gain)) return FusedRmsNorm::apply(x, gain, eps);
  at::Tensor h = x.to(at::kFloat);
  h = h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return gain * h.to(x.scalar_type());
}

}  // namespace kiln
