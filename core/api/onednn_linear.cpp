#include "core/api/onednn_linear.h"

#include <dlfcn.h>

#include <stdexcept>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/autograd.h>

#include "core/util/torch_compat.h"

namespace kiln {
namespace {

// dnnl_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc): row-major
// C = alpha op(A) op(B) + beta C; returns a dnnl_status_t, 0 on success. Its threads are OpenMP's,
// so LibTorch's thread count holds for it too.
using Sgemm = int(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                  int64_t, float, float*, int64_t);
Sgemm* sgemm() {
  static Sgemm* const found = reinterpret_cast<Sgemm*>(dlsym(RTLD_DEFAULT, "dnnl_sgemm"));
  return found;
}

// C[m, n] = op(A) op(B), row-major.
void gemm(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, const at::Tensor& a,
          const at::Tensor& b, at::Tensor& c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    c.zero_();
    return;
  }
  const int status =
      sgemm()(trans_a, trans_b, m, n, k, 1.0f, a.data_ptr<float>(), trans_a == 'N' ? k : m,
              b.data_ptr<float>(), trans_b == 'N' ? n : k, 0.0f, c.data_ptr<float>(), n);
  if (status != 0) {
    throw std::runtime_error(
        fmt::format("oneDNN's sgemm failed (status {}) on [{}, {}] x [{}]", status, m, n, k));
  }
}

// y = x w^T over x's rows; the bias is added outside, where LibTorch's add gives its gradient.
struct OnednnLinear : torch::autograd::Function<OnednnLinear> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight) {
    const at::Tensor rows = x.reshape({-1, x.size(-1)}).contiguous(), w = weight.contiguous();
    at::Tensor y = at::empty({rows.size(0), w.size(0)}, rows.options());
    gemm('N', 'T', rows.size(0), w.size(0), rows.size(1), rows, w, y);
    ctx->save_for_backward({rows, w});
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = w.size(0);
    return y.view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &rows = saved[0], &w = saved[1];
    const int64_t m = rows.size(0), in = rows.size(1), out = w.size(0);
    const at::Tensor dy = grads[0].reshape({m, out}).contiguous();
    at::Tensor dx = at::empty({m, in}, rows.options()), dw = at::empty({out, in}, w.options());
    gemm('N', 'N', m, in, out, dy, w, dx);     // dx = dy w
    gemm('T', 'N', out, in, m, dy, rows, dw);  // dw = dy^T x
    std::vector<int64_t> shape = grads[0].sizes().vec();
    shape.back() = in;
    return {dx.view(shape), dw};
  }
};

}  // namespace

bool onednn_linear_applies(const at::Tensor& x, const at::Tensor& weight) {
  if (sgemm() == nullptr || compat::AutocastGuard::enabled(at::kCPU)) return false;
  for (const at::Tensor* t : {&x, &weight}) {
    if (!t->device().is_cpu() || t->layout() != at::kStrided || t->scalar_type() != at::kFloat)
      return false;
  }
  return weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1);
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  bool fused) {
  if (!fused || !onednn_linear_applies(x, weight)) return at::linear(x, weight, bias);
  const at::Tensor y = OnednnLinear::apply(x, weight);
  return bias.defined() ? y + bias : y;
}

}  // namespace kiln
