// Linear layers on oneDNN's GEMMs (core/api/onednn_linear.h) against y = x w^T + b computed here
// in double precision with LibTorch's ops, forward and the gradients of x, w and b, at shapes that
// are not multiples of any vector width, with and without a bias and with inputs of one to three
// dimensions; under CPU autocast to bfloat16, against the same product of the operands rounded to
// bfloat16 by LibTorch; under float32 matmul precision "medium", within bf16 rounding's bound;
// LibTorch's linear where oneDNN does not apply (a bfloat16 model); a frozen bfloat16 weight
// under fp32 on either path.
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/api/onednn_linear.h"
#include "core/util/blas_kernels.h"
#include "core/util/torch_compat.h"
#include "kernel_parity.h"
#include "tensor_compare.h"

namespace kiln {
namespace {

using testing::max_difference;

class OnednnLinear : public ::testing::Test {
 protected:
  void SetUp() override {
    if (onednn_version().empty()) {
      GTEST_SKIP() << "SKIP: this LibTorch does not expose oneDNN's dnnl_sgemm (Debian's does)";
    }
  }
};

TEST_F(OnednnLinear, OutputAndGradientsMatchTheDefinitionInDoublePrecision) {
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
        ASSERT_EQ(onednn_linear_math(x, w), MatmulMath::fp32);
        at::Tensor y = linear(x, w, b, /*fused=*/true);
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

// Under autocast to bfloat16 oneDNN multiplies x, w and the upstream gradient rounded to bf16
// (LibTorch's rounding, to nearest even), summing in fp32: the reference is that product of the
// rounded operands in double precision, and y and every gradient come back in fp32.
TEST_F(OnednnLinear, UnderBfloat16AutocastTheProductsOfRoundedOperandsAreSummedInFp32) {
  if (!onednn_has_bf16_gemm()) {
    GTEST_SKIP() << "SKIP: this oneDNN has no dnnl_gemm_bf16bf16f32 (Debian 12's 2.6 has)";
  }
  for (const auto& [rows, in, out] :
       {std::tuple<int64_t, int64_t, int64_t>{5, 13, 7}, {37, 64, 129}, {64, 200, 3}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(in) + " -> " + std::to_string(out));
    torch::manual_seed(static_cast<uint64_t>(rows + in + out));
    at::Tensor x = at::randn({rows, in}).requires_grad_();
    at::Tensor w = at::randn({out, in}).requires_grad_();
    at::Tensor b = at::randn({out}).requires_grad_();
    at::Tensor upstream = at::randn({rows, out});
    at::Tensor y;
    {
      compat::AutocastGuard autocast(at::kCPU, at::kBFloat16);
      ASSERT_EQ(onednn_linear_math(x, w), MatmulMath::bf16);
      y = linear(x, w, b, /*fused=*/true);
    }
    EXPECT_EQ(y.scalar_type(), at::kFloat);
    (y * upstream).sum().backward();
    auto rounded = [](const at::Tensor& t) { return t.detach().to(at::kBFloat16).to(at::kDouble); };
    const at::Tensor xb = rounded(x), wb = rounded(w), dyb = rounded(upstream);
    auto tolerance = [](int64_t k) { return 1e-6 * static_cast<double>(k) + 1e-6; };
    EXPECT_LT(max_difference(y, at::matmul(xb, wb.t()) + b.detach().to(at::kDouble)),
              tolerance(in));
    EXPECT_LT(max_difference(x.grad(), at::matmul(dyb, wb)), tolerance(out));
    EXPECT_LT(max_difference(w.grad(), at::matmul(dyb.t(), xb)), tolerance(rows));
    EXPECT_LT(max_difference(b.grad(), upstream.sum(0)), tolerance(rows));
    EXPECT_EQ(x.grad().scalar_type(), at::kFloat);
    EXPECT_EQ(w.grad().scalar_type(), at::kFloat);
    // And they are not the fp32 results: the rounding happened.
    EXPECT_GT(max_difference(y, at::linear(x, w, b)), 1e-4);
  }
}

// Under float32 matmul precision "medium" (precision "bf32") the products run on oneDNN's matmul
// primitive in its fpmath mode bf16: within bf16 rounding's bound of the double-precision
// definition (each operand rounded to 8 bits of mantissa, products summed in fp32), forward and
// backward, with fp32 tensors throughout; the primitive's kernels are then named for `kiln bench`.
TEST_F(OnednnLinear, UnderFloat32PrecisionMediumTheProductsAreWithinBf16RoundingOfTheDefinition) {
  if (!onednn_matmul_built()) {
    GTEST_SKIP() << "SKIP: this build has no oneDNN matmul (no libdnnl-dev of LibTorch's oneDNN)";
  }
  struct Medium {
    Medium() { at::globalContext().setFloat32MatmulPrecision("medium"); }
    ~Medium() { at::globalContext().setFloat32MatmulPrecision("highest"); }
  } medium;
  for (const auto& [rows, in, out] :
       {std::tuple<int64_t, int64_t, int64_t>{5, 13, 7}, {37, 64, 129}, {64, 200, 3}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(in) + " -> " + std::to_string(out));
    torch::manual_seed(static_cast<uint64_t>(rows * in + out));
    at::Tensor x = at::randn({rows, in}).requires_grad_();
    at::Tensor w = at::randn({out, in}).requires_grad_();
    at::Tensor upstream = at::randn({rows, out});
    ASSERT_EQ(onednn_linear_math(x, w), MatmulMath::bf32);
    at::Tensor y = linear(x, w, {}, /*fused=*/true);
    EXPECT_EQ(y.scalar_type(), at::kFloat);
    (y * upstream).sum().backward();
    const at::Tensor x64 = x.detach().to(at::kDouble), w64 = w.detach().to(at::kDouble),
                     dy64 = upstream.to(at::kDouble);
    // |error| <= (2^-8 + 2^-17 + k 2^-23) sum |a b| for each element, k the reduction's length.
    auto within = [](const at::Tensor& got, const at::Tensor& a, const at::Tensor& b, int64_t k) {
      const double relative = std::ldexp(1.0, -8) + std::ldexp(1.0, -17) +
                              static_cast<double>(k) * std::ldexp(1.0, -23);
      const at::Tensor bound = at::matmul(a.abs(), b.abs()) * relative + 1e-12;
      return ((got.to(at::kDouble) - at::matmul(a, b)).abs() / bound).max().item<double>();
    };
    EXPECT_LE(within(y, x64, w64.t(), in), 1.0);
    EXPECT_LE(within(x.grad(), dy64, w64, out), 1.0);
    EXPECT_LE(within(w.grad(), dy64.t(), x64, rows), 1.0);
  }
  EXPECT_NE(onednn_linear_kernels().find("matmul bf32 "), std::string::npos)
      << onednn_linear_kernels();
}

TEST_F(OnednnLinear, ABfloat16ModelKeepsLibTorchsLinear) {
  at::Tensor x = at::randn({4, 8}), w = at::randn({3, 8});
  EXPECT_EQ(onednn_linear_math(x.to(at::kBFloat16), w.to(at::kBFloat16)), std::nullopt);
  EXPECT_EQ(linear(x.to(at::kBFloat16), w.to(at::kBFloat16), {}, /*fused=*/true).scalar_type(),
            at::kBFloat16);
  // A bf16 weight that trains would get an fp32 gradient from oneDNN's path.
  EXPECT_EQ(onednn_linear_math(x, w.to(at::kBFloat16).requires_grad_()), std::nullopt);
  {
    compat::AutocastGuard autocast(at::kCPU, at::kBFloat16);
    EXPECT_EQ(linear(x, w, {}, /*fused=*/false).scalar_type(), at::kBFloat16);
  }
  EXPECT_EQ(onednn_linear_math(x, w), MatmulMath::fp32);
}

// A frozen weight kept in bf16 (adapter.base_dtype) under an fp32 input: each path computes
// x w^T + b over the bf16-rounded weight, as the definition in double does, with x's gradient.
TEST_F(OnednnLinear, AFrozenBfloat16WeightUnderFp32ComputesWithTheRoundedWeight) {
  torch::manual_seed(3);
  const at::Tensor w = at::randn({129, 64}).to(at::kBFloat16), b = at::randn({129});
  ASSERT_EQ(onednn_linear_math(at::randn({2, 64}), w), MatmulMath::fp32);
  const at::Tensor w64 = w.to(at::kDouble);
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "oneDNN" : "LibTorch's linear");
    at::Tensor x = at::randn({3, 5, 64}).requires_grad_();
    at::Tensor y = linear(x, w, b, fused);
    EXPECT_EQ(y.scalar_type(), at::kFloat);
    const at::Tensor upstream = at::randn({3, 5, 129});
    (y * upstream).sum().backward();
    const at::Tensor x64 = x.detach().to(at::kDouble);
    EXPECT_LT(max_difference(y, at::matmul(x64, w64.t()) + b.to(at::kDouble)), 1e-4);
    EXPECT_LT(max_difference(x.grad(), at::matmul(upstream.to(at::kDouble), w64)), 1e-4);
  }
  if (!onednn_has_bf16_gemm()) return;  // then bf16 autocast keeps LibTorch's linear
  compat::AutocastGuard autocast(at::kCPU, at::kBFloat16);
  EXPECT_EQ(onednn_linear_math(at::randn({2, 64}), w), MatmulMath::bf16);
}

// transformer_lm's layers through oneDNN (model.kernels = "fused") against LibTorch's linear.
TEST_F(OnednnLinear, TransformerLmLossAndGradientsMatchLibTorchsLinear) {
  testing::expect_fused_kernels_match_torch(
      "transformer_lm", {"model.d_model=32", "model.nhead=2", "model.num_layers=2",
                         "model.dim_feedforward=48", "model.max_len=24", "model.dropout=0"});
}

}  // namespace
}  // namespace kiln
