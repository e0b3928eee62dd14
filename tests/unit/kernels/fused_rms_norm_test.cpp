// The fused RMSNorm (core/kernels/fused_rms_norm.h) against RMSNorm's definition computed here in
// double precision, forward and gradients, at widths that are and are not multiples of the vector
// width; and llama's loss and gradients with the fused kernels against LibTorch's ops.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/kernels/fused_rms_norm.h"
#include "kernel_parity.h"
#include "tensor_compare.h"

namespace kiln {
namespace {

using testing::max_difference;

TEST(FusedRmsNorm, OutputAndGradientsMatchTheDefinitionInDoublePrecision) {
  const double eps = 1e-5;
  for (int64_t c : {1, 7, 13, 16, 64, 100, 768}) {
    SCOPED_TRACE("width " + std::to_string(c));
    torch::manual_seed(static_cast<uint64_t>(c));
    at::Tensor x = at::randn({3, 5, c}).requires_grad_();
    at::Tensor gain = (at::rand({c}) + 0.5).requires_grad_();
    at::Tensor upstream = at::randn({3, 5, c});
    ASSERT_TRUE(fused_rms_norm_applies(x, gain));
    at::Tensor y = rms_norm(x, gain, eps, /*fused=*/true);
    (y * upstream).sum().backward();

    at::Tensor x64 = x.detach().to(at::kDouble).requires_grad_();
    at::Tensor gain64 = gain.detach().to(at::kDouble).requires_grad_();
    at::Tensor want = x64 / at::sqrt((x64 * x64).mean(-1, /*keepdim=*/true) + eps) * gain64;
    (want * upstream.to(at::kDouble)).sum().backward();
    EXPECT_LT(max_difference(y, want), 1e-5);
    EXPECT_LT(max_difference(x.grad(), x64.grad()), 1e-5);
    EXPECT_LT(max_difference(gain.grad(), gain64.grad()), 1e-4 * std::sqrt(15.0));
  }
}

TEST(FusedRmsNorm, OtherTypesAndDevicesKeepLibTorchsOps) {
  at::Tensor x = at::randn({2, 8});
  EXPECT_FALSE(fused_rms_norm_applies(x.to(at::kBFloat16), at::ones({8})));
  EXPECT_FALSE(fused_rms_norm_applies(x, at::ones({8}, at::kDouble)));
  EXPECT_FALSE(fused_rms_norm_applies(x, at::ones({7})));
  at::Tensor half = x.to(at::kBFloat16);
  EXPECT_TRUE(at::equal(rms_norm(half, at::ones({8}), 1e-5, true),
                        rms_norm(half, at::ones({8}), 1e-5, false)));
}

TEST(FusedRmsNorm, LlamaLossAndGradientsMatchLibTorchsOps) {
  testing::expect_fused_kernels_match_torch(
      "llama", {"model.n_layer=2", "model.n_head=4", "model.n_kv_head=2", "model.n_embd=40",
                "model.ffn_dim=52", "model.block_size=24", "model.qk_norm=true"});
}

}  // namespace
}  // namespace kiln
