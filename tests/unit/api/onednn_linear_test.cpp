// Linear layers on oneDNN's GEMMs (core/api/onednn_linear.h) against y = x w^T + b computed here
// in double precision with LibTorch's ops, forward and the gradients of x, w and b, at shapes that
// are not multiples of any vector width, with and without a bias and with inputs of one to three
// dimensions; LibTorch's linear where oneDNN does not apply (bfloat16, CPU autocast).
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/api/onednn_linear.h"
#include "core/util/blas_kernels.h"
#include "core/util/torch_compat.h"

namespace kiln {
namespace {

double max_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

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
        ASSERT_TRUE(onednn_linear_applies(x, w));
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

TEST_F(OnednnLinear, Bfloat16AndCpuAutocastKeepLibTorchsLinear) {
  at::Tensor x = at::randn({4, 8}), w = at::randn({3, 8});
  EXPECT_FALSE(onednn_linear_applies(x.to(at::kBFloat16), w.to(at::kBFloat16)));
  {
    compat::AutocastGuard autocast(at::kCPU, at::kBFloat16);
    EXPECT_FALSE(onednn_linear_applies(x, w));
    EXPECT_EQ(linear(x, w, {}, /*fused=*/true).scalar_type(), at::kBFloat16);
  }
  EXPECT_TRUE(onednn_linear_applies(x, w));
}

}  // namespace
}  // namespace kiln
