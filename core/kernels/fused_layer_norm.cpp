#include "core/kernels/fused_layer_norm.h"

#include <cmath>
#include <vector>

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

// Rows [begin, end) of c elements: h = x + a, then n = (h - mean) * rstd * w + b, rstd being
// 1 / sqrt(variance + eps); each row's mean and rstd kept for backward.
KILN_ISA_CLONES void forward_rows(const float* x, const float* a, const float* w, const float* b,
                                  float* h, float* n, float* mean, float* rstd, float eps,
                                  int64_t c, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const float *xr = x + r * c, *ar = a + r * c;
    float *hr = h + r * c, *nr = n + r * c;
    Floats lanes = splat(0);
    int64_t j = 0;
    for (; j + kLanes <= c; j += kLanes) {
      const Floats v = load(xr + j) + load(ar + j);
      store(hr + j, v);
      lanes += v;
    }
    float sum = sum_lanes(lanes);
    for (; j < c; ++j)
      sum += hr[j] = xr[j] + ar[j];
    const float m = sum / static_cast<float>(c);
    lanes = splat(0);
    for (j = 0; j + kLanes <= c; j += kLanes) {
      const Floats d = load(hr + j) - splat(m);
      lanes += d * d;
    }
    float squares = sum_lanes(lanes);
    for (; j < c; ++j)
      squares += (hr[j] - m) * (hr[j] - m);
    const float s = 1.0f / std::sqrt(squares / static_cast<float>(c) + eps);
    for (j = 0; j + kLanes <= c; j += kLanes) {
      Floats v = (load(hr + j) - splat(m)) * splat(s) * load(w + j);
      if (b != nullptr) v += load(b + j);
      store(nr + j, v);
    }
    for (; j < c; ++j)
      nr[j] = (hr[j] - m) * s * w[j] + (b != nullptr ? b[j] : 0.0f);
    mean[r] = m;
    rstd[r] = s;
  }
}

// Backward over rows [begin, end): with x^ = (h - mean) rstd and g = dn w,
// dh = dh_in + rstd (g - mean(g) - x^ mean(g x^)); dw and db (this thread's) add dn x^ and dn.
KILN_ISA_CLONES void backward_rows(const float* h, const float* dn, const float* dh_in,
                                   const float* w, const float* mean, const float* rstd, float* dh,
                                   float* dw, float* db, int64_t c, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const float *hr = h + r * c, *dnr = dn + r * c;
    float* dhr = dh + r * c;
    const float m = mean[r], s = rstd[r];
    Floats g_lanes = splat(0), gx_lanes = splat(0);
    int64_t j = 0;
    for (; j + kLanes <= c; j += kLanes) {
      const Floats xhat = (load(hr + j) - splat(m)) * splat(s);
      const Floats g = load(dnr + j) * load(w + j);
      g_lanes += g;
      gx_lanes += g * xhat;
    }
    float g_sum = sum_lanes(g_lanes), gx_sum = sum_lanes(gx_lanes);
    for (; j < c; ++j) {
      const float xhat = (hr[j] - m) * s, g = dnr[j] * w[j];
      g_sum += g;
      gx_sum += g * xhat;
    }
    const float g_mean = g_sum / static_cast<float>(c), gx_mean = gx_sum / static_cast<float>(c);
    for (j = 0; j + kLanes <= c; j += kLanes) {
      const Floats xhat = (load(hr + j) - splat(m)) * splat(s);
      const Floats d = load(dnr + j);
      Floats out = splat(s) * (d * load(w + j) - splat(g_mean) - xhat * splat(gx_mean));
      if (dh_in != nullptr) out += load(dh_in + r * c + j);
      store(dhr + j, out);
      store(dw + j, load(dw + j) + d * xhat);
      store(db + j, load(db + j) + d);
    }
    for (; j < c; ++j) {
      const float xhat = (hr[j] - m) * s, d = dnr[j];
      dhr[j] = s * (d * w[j] - g_mean - xhat * gx_mean) + (dh_in != nullptr ? dh_in[r * c + j] : 0);
      dw[j] += d * xhat;
      db[j] += d;
    }
  }
}

// Rows per task: about 32k elements.
int64_t grain_for(int64_t c) {
  return std::max<int64_t>(1, 32768 / c);
}

struct FusedAddLayerNorm : torch::autograd::Function<FusedAddLayerNorm> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& x, const at::Tensor& a,
                                                const at::Tensor& weight, const at::Tensor& bias,
                                                double eps) {
    const at::Tensor xs = x.contiguous(), as = a.contiguous(), w = weight.contiguous();
    const bool has_bias = bias.numel() > 0;  // empty: none (autograd takes no undefined input)
    const at::Tensor b = has_bias ? bias.contiguous() : at::Tensor();
    const int64_t c = x.size(-1), rows = x.numel() / c;
    at::Tensor h = at::empty_like(xs), n = at::empty_like(xs);
    at::Tensor mean = at::empty({rows}, xs.options()), rstd = at::empty({rows}, xs.options());
    at::parallel_for(0, rows, grain_for(c), [&](int64_t begin, int64_t end) {
      forward_rows(xs.data_ptr<float>(), as.data_ptr<float>(), w.data_ptr<float>(),
                   has_bias ? b.data_ptr<float>() : nullptr, h.data_ptr<float>(),
                   n.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
                   static_cast<float>(eps), c, begin, end);
    });
    ctx->save_for_backward({h, w, mean, rstd});
    ctx->saved_data["bias"] = has_bias;
    return {h, n};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &h = saved[0], &w = saved[1], &mean = saved[2], &rstd = saved[3];
    const bool has_bias = ctx->saved_data["bias"].toBool();
    const at::Tensor dh_in = grads[0].defined() ? grads[0].contiguous() : at::Tensor();
    if (!grads[1].defined()) return {dh_in, dh_in, at::Tensor(), at::Tensor(), at::Tensor()};
    const at::Tensor dn = grads[1].contiguous();
    const int64_t c = h.size(-1), rows = h.numel() / c;
    at::Tensor dh = at::empty_like(h);
    // Each thread sums its rows' dw and db into its own row of these; the rows are added after.
    const int threads = at::get_num_threads();
    at::Tensor dw_parts = at::zeros({threads, c}, h.options());
    at::Tensor db_parts = at::zeros({threads, c}, h.options());
    at::parallel_for(0, rows, grain_for(c), [&](int64_t begin, int64_t end) {
      const int64_t t = at::get_thread_num();
      backward_rows(h.data_ptr<float>(), dn.data_ptr<float>(),
                    dh_in.defined() ? dh_in.data_ptr<float>() : nullptr, w.data_ptr<float>(),
                    mean.data_ptr<float>(), rstd.data_ptr<float>(), dh.data_ptr<float>(),
                    dw_parts[t].data_ptr<float>(), db_parts[t].data_ptr<float>(), c, begin, end);
    });
    return {dh, dh, dw_parts.sum(0), has_bias ? db_parts.sum(0) : at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool fused_add_layer_norm_applies(const at::Tensor& x, const at::Tensor& a) {
  for (const at::Tensor* t : {&x, &a}) {
    if (!t->device().is_cpu() || t->layout() != at::kStrided || t->scalar_type() != at::kFloat)
      return false;
  }
  return x.sizes() == a.sizes();
}

std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& a,
                                                 const at::Tensor& weight, const at::Tensor& bias,
                                                 double eps, bool fused) {
  if (fused && fused_add_layer_norm_applies(x, a) && weight.scalar_type() == at::kFloat) {
    auto out = FusedAddLayerNorm::apply(
        x, a, weight, bias.defined() ? bias : at::empty({0}, weight.options()), eps);
    return {out[0], out[1]};
  }
  at::Tensor h = x + a;
  return {h, at::layer_norm(h, {h.size(-1)}, weight, bias, eps)};
}

LayerNormImpl::LayerNormImpl(int64_t dim, bool bias, double eps) : dim_(dim), eps_(eps) {
  weight = register_parameter("weight", at::ones({dim}));
  if (bias) this->bias = register_parameter("bias", at::zeros({dim}));
}

at::Tensor LayerNormImpl::forward(const at::Tensor& x) {
  return at::layer_norm(x, {dim_}, weight, bias, eps_);
}

}  // namespace kiln
