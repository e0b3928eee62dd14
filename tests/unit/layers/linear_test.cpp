// Kiln's linear layers (core/layers/linear.h) against y = x w^T + b computed here in double
// precision with LibTorch's ops, forward and the gradients of x, w and b, at shapes that are not
// multiples of any vector width, with and without a bias and with inputs of one to three
// dimensions; under CPU autocast to bfloat16 and under float32 matmul precision "medium"
// (precisions bf16 and bf32), within bf16 rounding's bound; a frozen bfloat16 weight under fp32
// and under autocast, computing with the rounded weight.
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/kernels/cpu_features.h"
#include "core/layers/linear.h"
#include "core/util/torch_compat.h"
#include "tensor_compare.h"

namespace kiln {
namespace {

using testing::max_difference;

// How far `got` is from a b, elementwise at most, in units of `roundings` bf16 roundings of
// sum |a b| (2^-9 each) plus fp32's k 2^-23 for a reduction of length k. A product of operands
// rounded to bf16, summed in fp32 and rounded to bf16 once more, takes three; bf32's, whose
// result stays fp32, two.
double in_bf16_bounds(const at::Tensor& got, const at::Tensor& a, const at::Tensor& b, int64_t k,
                      int roundings) {
  const double relative =
      roundings * std::ldexp(1.0, -9) + static_cast<double>(k) * std::ldexp(1.0, -23);
  const at::Tensor bound = at::matmul(a.abs(), b.abs()) * relative + 1e-12;
  return ((got.to(at::kDouble) - at::matmul(a, b)).abs() / bound).max().item<double>();
}

// LibTorch leaves products smaller than this (m k n) to MKL in fp32 (its mkldnn_gemm_min_size,
// aten/src/ATen/native/mkldnn/Matmul.cpp), bf32 or not.
constexpr int64_t kSmallestOneDnnProduct = 16 * 16 * 16;

TEST(Linear, OutputAndGradientsMatchTheDefinitionInDoublePrecision) {
  const std::vector<std::vector<int64_t>> leading = {{5}, {3, 7}, {2, 3, 11}, {0}};
  for (const auto& lead : leading) {
    for (const auto& [in, out] : {std::pair<int64_t, int64_t>{1, 1}, {13, 7}, {64, 129}}) {
      for (bool with_bias : {true, false}) {
        SCOPED_TRACE(std::to_string(lead.size()) + " leading dims from " +
                     std::to_string(lead.front()) + ", " + std::to_string(in) + " -> " +
                     std::to_string(out) + (with_bias ? ", bias" : ", no bias"));
        torch::manual_seed(static_cast<uint64_t>(in * 131 + out));
        std::vector<int64_t> shape = lead;
        shape.push_back(in);
        at::Tensor x = at::randn(shape).requires_grad_();
        at::Tensor w = at::randn({out, in}).requires_grad_();
        at::Tensor b = with_bias ? at::randn({out}).requires_grad_() : at::Tensor();
        at::Tensor y = linear(x, w, b);
        shape.back() = out;
        ASSERT_EQ(y.sizes(), at::IntArrayRef(shape));
        at::Tensor upstream = at::randn(shape);
        (y * upstream).sum().backward();

        at::Tensor x64 = x.detach().to(at::kDouble).requires_grad_();
        at::Tensor w64 = w.detach().to(at::kDouble).requires_grad_();
        at::Tensor b64 = with_bias ? b.detach().to(at::kDouble).requires_grad_() : at::Tensor();
        at::Tensor want = at::matmul(x64, w64.t());
        if (with_bias) want = want + b64;
        (want * upstream.to(at::kDouble)).sum().backward();
        // fp32 sums of K products of unit normals: within a few 1e-7 of K (K = the length of
        // the reduction).
        auto tolerance = [](int64_t k) { return 1e-6 * static_cast<double>(k) + 1e-6; };
        const int64_t rows = x.numel() / in;
        if (rows > 0) {
          EXPECT_LT(max_difference(y, want), tolerance(in));
          EXPECT_LT(max_difference(x.grad(), x64.grad()), tolerance(out));
        }
        EXPECT_LT(max_difference(w.grad(), w64.grad()), tolerance(rows));
        if (with_bias) {
          EXPECT_LT(max_difference(b.grad(), b64.grad()), tolerance(rows));
        }
      }
    }
  }
}

// Under autocast to bfloat16 (precision "bf16") the products take x, w and the upstream gradient
// rounded to bf16 and give bf16: within bf16 rounding's bound of the double-precision definition,
// forward and backward, and not the fp32 result. The gradients' bound allows eight roundings, as
// LibTorch's bf16 backward rounds more often than one product does (measured: 4.3 for x's
// gradient at 64 x 200 -> 3).
TEST(Linear, UnderBfloat16AutocastTheProductsAreWithinBf16RoundingOfTheDefinition) {
  for (const auto& [rows, in, out] :
       {std::tuple<int64_t, int64_t, int64_t>{5, 13, 7}, {37, 64, 129}, {64, 200, 3}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(in) + " -> " + std::to_string(out));
    torch::manual_seed(static_cast<uint64_t>(rows + in + out));
    at::Tensor x = at::randn({rows, in}).requires_grad_();
    at::Tensor w = at::randn({out, in}).requires_grad_();
    at::Tensor upstream = at::randn({rows, out});
    at::Tensor y;
    {
      compat::AutocastGuard autocast(at::kCPU, at::kBFloat16);
      y = linear(x, w, at::Tensor());
    }
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    (y.to(at::kFloat) * upstream).sum().backward();
    const at::Tensor x64 = x.detach().to(at::kDouble), w64 = w.detach().to(at::kDouble),
                     dy64 = upstream.to(at::kDouble);
    EXPECT_LE(in_bf16_bounds(y, x64, w64.t(), in, 3), 1.0);
    EXPECT_LE(in_bf16_bounds(x.grad(), dy64, w64, out, 8), 1.0);
    EXPECT_LE(in_bf16_bounds(w.grad(), dy64.t(), x64, rows, 8), 1.0);
    EXPECT_EQ(w.grad().scalar_type(), at::kFloat);
    EXPECT_GT(max_difference(y, at::linear(x, w)), 1e-4);  // the rounding happened
  }
}

// Under float32 matmul precision "medium" (precision "bf32") LibTorch sends fp32 products to
// oneDNN in its fpmath mode bf16 where the CPU multiplies bf16 natively: within bf16 rounding's
// bound of the definition, forward and backward, with fp32 tensors throughout; rounded there
// (but for products too small for oneDNN), exact elsewhere.
TEST(Linear, UnderFloat32PrecisionMediumTheProductsAreWithinBf16RoundingOfTheDefinition) {
  struct Medium {
    Medium() { at::globalContext().setFloat32MatmulPrecision("medium"); }
    ~Medium() { at::globalContext().setFloat32MatmulPrecision("highest"); }
  } medium;
  const CpuFeatures cpu = read_cpu_features();
  const bool rounds = cpu.avx512_bf16 || cpu.amx_bf16;
  for (const auto& [rows, in, out] :
       {std::tuple<int64_t, int64_t, int64_t>{5, 13, 7}, {37, 64, 129}, {64, 200, 3}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(in) + " -> " + std::to_string(out));
    torch::manual_seed(static_cast<uint64_t>(rows * in + out));
    at::Tensor x = at::randn({rows, in}).requires_grad_();
    at::Tensor w = at::randn({out, in}).requires_grad_();
    at::Tensor upstream = at::randn({rows, out});
    at::Tensor y = linear(x, w, at::Tensor());
    EXPECT_EQ(y.scalar_type(), at::kFloat);
    (y * upstream).sum().backward();
    const at::Tensor x64 = x.detach().to(at::kDouble), w64 = w.detach().to(at::kDouble),
                     dy64 = upstream.to(at::kDouble);
    EXPECT_LE(in_bf16_bounds(y, x64, w64.t(), in, 2), 1.0);
    EXPECT_LE(in_bf16_bounds(x.grad(), dy64, w64, out, 2), 1.0);
    EXPECT_LE(in_bf16_bounds(w.grad(), dy64.t(), x64, rows, 2), 1.0);
    const double from_fp32 = max_difference(y, at::matmul(x64, w64.t()));
    if (rounds && rows * in * out >= kSmallestOneDnnProduct) {
      EXPECT_GT(from_fp32, 1e-4);
    } else {
      EXPECT_LT(from_fp32, 1e-4);
    }
  }
}

// A frozen weight kept in bf16 (adapter.base_dtype) under an fp32 input computes x w^T + b over
// the bf16-rounded weight, as the definition in double does, with x's gradient; under autocast
// too, within bf16 rounding.
TEST(Linear, AFrozenBfloat16WeightComputesWithTheRoundedWeight) {
  torch::manual_seed(3);
  const at::Tensor w = at::randn({129, 64}).to(at::kBFloat16), b = at::randn({129});
  const at::Tensor w64 = w.to(at::kDouble);
  at::Tensor x = at::randn({3, 5, 64}).requires_grad_();
  at::Tensor y = linear(x, w, b);
  EXPECT_EQ(y.scalar_type(), at::kFloat);
  const at::Tensor upstream = at::randn({3, 5, 129});
  (y * upstream).sum().backward();
  const at::Tensor x64 = x.detach().to(at::kDouble);
  EXPECT_LT(max_difference(y, at::matmul(x64, w64.t()) + b.to(at::kDouble)), 1e-4);
  EXPECT_LT(max_difference(x.grad(), at::matmul(upstream.to(at::kDouble), w64)), 1e-4);

  compat::AutocastGuard autocast(at::kCPU, at::kBFloat16);
  const at::Tensor rows = x.detach().reshape({15, 64});
  EXPECT_LE(in_bf16_bounds(linear(rows, w, at::Tensor()), rows.to(at::kDouble), w64.t(), 64, 3),
            1.0);
}

}  // namespace
}  // namespace kiln
