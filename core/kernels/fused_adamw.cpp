#include "core/kernels/fused_adamw.h"

#include <cmath>

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include "core/kernels/float_vectors.h"

namespace kiln {
namespace {

using simd::Floats;
using simd::kLanes;
using simd::splat;

// Elements per task: large enough that a thread's share outweighs waking it.
constexpr int64_t kGrain = 32768;

// The step's scalars, each rounded to float once.
struct Scalars {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, sqrt_correction2, eps;
};

KILN_INLINE Floats sqrt_of(const Floats& x) {
  Floats out;
  for (int64_t i = 0; i < kLanes; ++i)
    out[i] = std::sqrt(x[i]);
  return out;
}

// p, m and v at once for one vector of elements.
KILN_INLINE void update(Floats& p, const Floats& g, Floats& m, Floats& v, const Scalars& s) {
  p = p * splat(s.decay);
  m = splat(s.beta1) * m + splat(s.one_minus_beta1) * g;
  v = splat(s.beta2) * v + splat(s.one_minus_beta2) * g * g;
  p = p - splat(s.step_size) * m / (sqrt_of(v) / splat(s.sqrt_correction2) + splat(s.eps));
}

KILN_ISA_CLONES void adamw_range(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                                 int64_t begin, int64_t end, const Scalars& s) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    Floats p = simd::load(param + i), m = simd::load(exp_avg + i), v = simd::load(exp_avg_sq + i);
    update(p, simd::load(grad + i), m, v, s);
    simd::store(param + i, p);
    simd::store(exp_avg + i, m);
    simd::store(exp_avg_sq + i, v);
  }
  for (; i < end; ++i) {  // the tail, element by element, with the same arithmetic
    const float g = grad[i];
    const float p = param[i] * s.decay;
    const float m = s.beta1 * exp_avg[i] + s.one_minus_beta1 * g;
    const float v = s.beta2 * exp_avg_sq[i] + s.one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p - s.step_size * m / (std::sqrt(v) / s.sqrt_correction2 + s.eps);
  }
}

}  // namespace

void fused_adamw_cpu(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                     const at::Tensor& exp_avg_sq, int64_t step, const AdamWHyper& hyper) {
  for (const at::Tensor* t : {&param, &grad, &exp_avg, &exp_avg_sq}) {
    TORCH_CHECK(t->is_cpu() && t->scalar_type() == at::kFloat && t->is_contiguous() &&
                    t->numel() == param.numel(),
                "fused AdamW on the CPU takes contiguous float32 tensors of one size");
  }
  const double correction1 = 1 - std::pow(hyper.beta1, static_cast<double>(step));
  const double correction2 = 1 - std::pow(hyper.beta2, static_cast<double>(step));
  const Scalars s{static_cast<float>(1 - hyper.lr * hyper.weight_decay),
                  static_cast<float>(hyper.beta1),
                  static_cast<float>(1 - hyper.beta1),
                  static_cast<float>(hyper.beta2),
                  static_cast<float>(1 - hyper.beta2),
                  static_cast<float>(hyper.lr / correction1),
                  static_cast<float>(std::sqrt(correction2)),
                  static_cast<float>(hyper.eps)};
  float* p = param.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  float* m = exp_avg.data_ptr<float>();
  float* v = exp_avg_sq.data_ptr<float>();
  at::parallel_for(0, param.numel(), kGrain,
                   [&](int64_t begin, int64_t end) { adamw_range(p, g, m, v, begin, end, s); });
}

}  // namespace kiln
