#include "core/kernels/fused_gelu.h"

#include <cstring>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include "core/kernels/float_vectors.h"

namespace kiln {
namespace {

using simd::Floats;
using simd::kLanes;
using simd::splat;

constexpr float kSqrtTwoOverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
// Elements per task: large enough that a thread's share outweighs waking it.
constexpr int64_t kGrain = 16384;

// tanh(u) = sign(u) (1 - e) / (1 + e) with e = e^(-2 |u|) in (0, 1], where exp_nonpositive holds.
KILN_INLINE Floats tanh_of(const Floats& u) {
  const Floats magnitude = u < splat(0) ? -u : u;
  const Floats e = simd::exp_nonpositive(splat(-2.0f) * magnitude);
  const Floats t = (splat(1.0f) - e) / (splat(1.0f) + e);
  return u < splat(0) ? -t : t;
}

KILN_INLINE Floats gelu_of(const Floats& x) {
  const Floats t = tanh_of(splat(kSqrtTwoOverPi) * (x + splat(kCubic) * x * x * x));
  return splat(0.5f) * x * (splat(1.0f) + t);
}

// d gelu / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 * 0.044715 x^2).
KILN_INLINE Floats gelu_slope(const Floats& x) {
  const Floats x2 = x * x;
  const Floats t = tanh_of(splat(kSqrtTwoOverPi) * (x + splat(kCubic) * x2 * x));
  const Floats du = splat(kSqrtTwoOverPi) * (splat(1.0f) + splat(3.0f * kCubic) * x2);
  return splat(0.5f) * (splat(1.0f) + t) + splat(0.5f) * x * (splat(1.0f) - t * t) * du;
}

// The last n % kLanes elements go through one zero-padded vector, so every element takes the
// same arithmetic as its neighbours.
KILN_INLINE Floats load_part(const float* p, int64_t n) {
  float lanes[kLanes] = {};
  std::memcpy(lanes, p, sizeof(float) * n);
  return simd::load(lanes);
}

KILN_INLINE void store_part(float* p, const Floats& v, int64_t n) {
  float lanes[kLanes];
  simd::store(lanes, v);
  std::memcpy(p, lanes, sizeof(float) * n);
}

KILN_ISA_CLONES void gelu_forward(const float* x, float* y, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    simd::store(y + i, gelu_of(simd::load(x + i)));
  if (i < end) store_part(y + i, gelu_of(load_part(x + i, end - i)), end - i);
}

KILN_ISA_CLONES void gelu_backward(const float* x, const float* dy, float* dx, int64_t begin,
                                   int64_t end) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    simd::store(dx + i, simd::load(dy + i) * gelu_slope(simd::load(x + i)));
  if (i < end) {
    const int64_t n = end - i;
    store_part(dx + i, load_part(dy + i, n) * gelu_slope(load_part(x + i, n)), n);
  }
}

struct FusedGelu : torch::autograd::Function<FusedGelu> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input) {
    const at::Tensor x = input.contiguous();
    at::Tensor y = at::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    at::parallel_for(0, x.numel(), kGrain,
                     [&](int64_t begin, int64_t end) { gelu_forward(in, out, begin, end); });
    ctx->save_for_backward({x});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(x);
    const float* in = x.data_ptr<float>();
    const float* up = dy.data_ptr<float>();
    float* down = dx.data_ptr<float>();
    at::parallel_for(0, x.numel(), kGrain,
                     [&](int64_t begin, int64_t end) { gelu_backward(in, up, down, begin, end); });
    return {dx};
  }
};

}  // namespace

bool fused_gelu_applies(const at::Tensor& x) {
  return x.device().is_cpu() && x.layout() == at::kStrided && x.scalar_type() == at::kFloat;
}

at::Tensor fused_gelu_tanh(const at::Tensor& x) {
  TORCH_CHECK(fused_gelu_applies(x), "fused_gelu_tanh takes a float32 CPU tensor");
  return FusedGelu::apply(x);
}

at::Tensor gelu_tanh(const at::Tensor& x, bool fused) {
  if (fused && fused_gelu_applies(x)) return FusedGelu::apply(x);
  return at::gelu(x, "tanh");
}

}  // namespace kiln
