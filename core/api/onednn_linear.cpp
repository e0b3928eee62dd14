#include "core/api/onednn_linear.h"

#include <dlfcn.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <fmt/format.h>
#include <torch/autograd.h>

#include "core/api/adapter.h"
#include "core/api/dropout.h"
#include "core/api/int8_weights.h"
#include "core/util/text.h"
#include "core/util/torch_compat.h"

namespace kiln {
namespace {

// dnnl_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc): row-major
// C = alpha op(A) op(B) + beta C; returns a dnnl_status_t, 0 on success. Its threads are OpenMP's,
// so LibTorch's thread count holds for it too. dnnl_gemm_bf16bf16f32 is the same with bfloat16 A
// and B: their products summed in fp32 into an fp32 C (oneDNN's AVX512-BF16 kernels where the
// CPU has them, an emulation on AVX-512 otherwise).
template <typename In>
using Gemm = int(char, char, int64_t, int64_t, int64_t, float, const In*, int64_t, const In*,
                 int64_t, float, float*, int64_t);
Gemm<float>* sgemm() {
  static Gemm<float>* const found =
      reinterpret_cast<Gemm<float>*>(dlsym(RTLD_DEFAULT, "dnnl_sgemm"));
  return found;
}
Gemm<uint16_t>* bf16_gemm() {
  static Gemm<uint16_t>* const found =
      reinterpret_cast<Gemm<uint16_t>*>(dlsym(RTLD_DEFAULT, "dnnl_gemm_bf16bf16f32"));
  return found;
}

// Which BLAS-like entry points ran, for onednn_linear_kernels.
std::atomic<bool> ran_sgemm{false}, ran_bf16_gemm{false};

// C[m, n] = op(A) op(B), row-major, C float32; A and B float32 for fp32 and bf32, bfloat16 for
// bf16.
void gemm(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, const at::Tensor& a,
          const at::Tensor& b, at::Tensor& c, MatmulMath math) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    c.zero_();
    return;
  }
  if (onednn_matmul_preferred(math)) {
    onednn_matmul({trans_a == 'T', trans_b == 'T', m, n, k, math}, a.data_ptr(), b.data_ptr(),
                  c.data_ptr<float>());
    return;
  }
  const int64_t lda = trans_a == 'N' ? k : m, ldb = trans_b == 'N' ? n : k;
  const bool bf16 = math == MatmulMath::bf16;
  (bf16 ? ran_bf16_gemm : ran_sgemm).store(true, std::memory_order_relaxed);
  const int status = bf16 ? bf16_gemm()(trans_a, trans_b, m, n, k, 1.0f,
                                        static_cast<const uint16_t*>(a.data_ptr()), lda,
                                        static_cast<const uint16_t*>(b.data_ptr()), ldb, 0.0f,
                                        c.data_ptr<float>(), n)
                          : sgemm()(trans_a, trans_b, m, n, k, 1.0f, a.data_ptr<float>(), lda,
                                    b.data_ptr<float>(), ldb, 0.0f, c.data_ptr<float>(), n);
  if (status != 0) {
    throw std::runtime_error(fmt::format("oneDNN's {} failed (status {}) on [{}, {}] x [{}]",
                                         bf16 ? "gemm_bf16bf16f32" : "sgemm", status, m, n, k));
  }
}

// The weight as a product's operands: a frozen int8 weight (adapter.base_dtype) dequantized, one
// kept in bf16 widened.
at::Tensor operand_weight(const at::Tensor& weight, at::ScalarType operands) {
  return (weight.scalar_type() == at::kChar ? dequantized(weight) : weight)
      .to(operands)
      .contiguous();
}

// y = x w^T over x's rows; the bias is added outside, where LibTorch's add gives its gradient.
struct OnednnLinear : torch::autograd::Function<OnednnLinear> {
  // bf16 rounds x and the weight to bfloat16 here (the sums and y stay fp32); backward takes its
  // products in the same math.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight, MatmulMath math) {
    const auto operands = math == MatmulMath::bf16 ? at::kBFloat16 : at::kFloat;
    const at::Tensor rows = x.reshape({-1, x.size(-1)}).to(operands).contiguous(),
                     w = operand_weight(weight, operands);
    at::Tensor y = at::empty({rows.size(0), w.size(0)}, rows.options().dtype(at::kFloat));
    gemm('N', 'T', rows.size(0), w.size(0), rows.size(1), rows, w, y, math);
    // A weight kept narrower than the product's operands (a frozen base in bf16 or int8 under
    // fp32 math, adapter.base_dtype) is saved as it is and widened again for backward: saving the
    // widened copy would hold every layer's fp32 weight until backward, the memory it saves.
    ctx->save_for_backward({rows, weight.element_size() < w.element_size() ? weight : w});
    ctx->saved_data["math"] = static_cast<int64_t>(math);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = w.size(0);
    return y.view(shape);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& rows = saved[0];
    const at::Tensor w = operand_weight(saved[1], rows.scalar_type());
    const auto math = static_cast<MatmulMath>(ctx->saved_data["math"].toInt());
    const int64_t m = rows.size(0), in = rows.size(1), out = w.size(0);
    const at::Tensor dy = grads[0].reshape({m, out}).to(rows.scalar_type()).contiguous();
    const auto fp32 = rows.options().dtype(at::kFloat);
    // A frozen weight (under an adapter, core/api/adapter.h) has no gradient to compute, nor
    // has the input of a first layer whose embedding is frozen.
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) {
      dx = at::empty({m, in}, fp32);
      gemm('N', 'N', m, in, out, dy, w, dx, math);  // dx = dy w
      std::vector<int64_t> shape = grads[0].sizes().vec();
      shape.back() = in;
      dx = dx.view(shape);
    }
    if (ctx->needs_input_grad(1)) {
      dw = at::empty({out, in}, fp32);
      gemm('T', 'N', out, in, m, dy, rows, dw, math);  // dw = dy^T x
    }
    return {dx, dw, at::Tensor()};
  }
};

}  // namespace

std::optional<MatmulMath> onednn_linear_math(const at::Tensor& x, const at::Tensor& weight) {
  for (const at::Tensor* t : {&x, &weight}) {
    if (!t->device().is_cpu() || t->layout() != at::kStrided) return std::nullopt;
  }
  const auto type = weight.scalar_type();
  const bool weight_dtype = type == at::kFloat || ((type == at::kBFloat16 || type == at::kChar) &&
                                                   !weight.requires_grad());
  if (weight.dim() != 2 || !weight_dtype || x.dim() < 1 || x.size(-1) != weight.size(1)) {
    return std::nullopt;
  }
  // Under CPU autocast to bfloat16 (precision "bf16"), bf16 GEMMs in place of LibTorch's
  // autocast linear, which casts the same operands but returns bf16 and sums through a slower
  // path (docs/benchmarks.md); the fp32 output keeps the fused kernels after it in fp32.
  if (compat::AutocastGuard::enabled(at::kCPU)) {
    const bool bf16 = compat::AutocastGuard::dtype_of(at::kCPU) == at::kBFloat16 &&
                      (bf16_gemm() != nullptr || onednn_matmul_preferred(MatmulMath::bf16)) &&
                      (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16);
    return bf16 ? std::optional(MatmulMath::bf16) : std::nullopt;
  }
  if (x.scalar_type() != at::kFloat) return std::nullopt;
  if (at::globalContext().float32MatmulPrecision() == at::Float32MatmulPrecision::MEDIUM &&
      onednn_matmul_built()) {
    return MatmulMath::bf32;
  }
  if (sgemm() == nullptr) return std::nullopt;
  return MatmulMath::fp32;
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  bool fused) {
  const auto math = fused ? onednn_linear_math(x, weight) : std::nullopt;
  at::Tensor y;
  if (!math) {
    // A frozen int8 weight (adapter.base_dtype) is dequantized; outside autocast, one kept in bf16
    // is widened to the input's type for LibTorch's linear, which takes one type; autocast casts
    // both itself.
    const at::Tensor w = weight.scalar_type() == at::kChar ? dequantized(weight) : weight;
    const bool widen = w.scalar_type() == at::kBFloat16 && !w.requires_grad() &&
                       x.scalar_type() == at::kFloat &&
                       !compat::AutocastGuard::enabled(x.device().type());
    y = at::linear(x, widen ? w.to(x.scalar_type()) : w, bias);
  } else {
    y = OnednnLinear::apply(x, weight, *math);
    if (bias.defined()) y = y + bias;
  }
  const LowRankSite* site = low_rank_site(weight);
  if (!site) return y;
  const SliceOf input = site->input_whole == 0
                            ? SliceOf{}
                            : SliceOf{x.dim() - 1, site->input_start, site->input_whole};
  const at::Tensor dropped = dropout(x, site->dropout, site->training(), site->dropout_site, input);
  const at::Tensor low = linear(linear(dropped, site->a, {}, fused), site->b, {}, fused);
  return y + low * site->scale;
}

std::string onednn_linear_kernels() {
  std::vector<std::string> kernels;
  for (const std::string& used : onednn_matmul_implementations_used()) {
    kernels.push_back("matmul " + used);
  }
  if (ran_sgemm) kernels.push_back("dnnl_sgemm");
  if (ran_bf16_gemm) kernels.push_back("dnnl_gemm_bf16bf16f32");
  if (kernels.empty()) return "";
  const std::string line = join(kernels, ", ");
  const std::string isa = onednn_cpu_isa();
  return isa.empty() ? line : line + "; oneDNN ISA " + isa;
}

}  // namespace kiln
