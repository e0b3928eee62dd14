// Frozen int8 weights (core/layers/int8_weights.h): the quantization against its definition written
// here in double precision (s_i = max_j |w_ij| / 127, every element within s_i / 2), and linear()
// on such a weight against the product of the dequantized weight computed here, on both of its
// paths, with the bound the quantization gives against the fp32 weight.
#include <cmath>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/layers/int8_weights.h"
#include "core/layers/linear.h"

namespace kiln {
namespace {

// Rows of magnitudes 1e-3 to 1e3, and a row of zeros.
at::Tensor weights() {
  torch::manual_seed(7);
  at::Tensor w = torch::randn({7, 13});
  for (int64_t i = 0; i < 6; ++i)
    w[i].mul_(std::pow(10.0, static_cast<double>(i) - 3));
  w[6].zero_();
  return w;
}

TEST(Int8Weights, EveryWeightIsWithinHalfItsRowsScale) {
  const at::Tensor w = weights();
  const Int8Rows q = quantize_rows(w);
  ASSERT_EQ(q.values.scalar_type(), at::kChar);
  ASSERT_EQ(q.values.sizes(), w.sizes());
  ASSERT_EQ(q.scales.sizes(), (std::vector<int64_t>{7}));
  const at::Tensor wd = w.to(at::kDouble);
  for (int64_t i = 0; i < w.size(0); ++i) {
    const double largest = wd[i].abs().max().item<double>();
    const double scale = largest == 0 ? 1.0 : largest / 127.0;
    EXPECT_NEAR(q.scales[i].item<double>(), scale, scale * 1e-6) << "row " << i;
    const at::Tensor values = q.values[i].to(at::kDouble);
    EXPECT_LE(values.abs().max().item<double>(), 127);
    if (largest > 0) {
      EXPECT_EQ(values.abs().max().item<double>(), 127) << "row " << i;
    }
    const double worst = (wd[i] - values * q.scales[i].item<double>()).abs().max().item<double>();
    EXPECT_LE(worst, scale / 2 * (1 + 1e-6)) << "row " << i;
  }
}

TEST(Int8Weights, LinearComputesWithTheDequantizedWeightWithinTheQuantizationBound) {
  const at::Tensor original = weights();
  Int8Rows q = quantize_rows(original);
  const at::Tensor dequantized_here =
      q.values.to(at::kDouble) * q.scales.to(at::kDouble).unsqueeze(1);
  const at::Tensor weight = q.values.clone();  // a frozen parameter: no gradient
  auto handle = register_int8_scales(weight, q.scales);
  torch::manual_seed(3);
  const at::Tensor bias = torch::randn({7});
  {
    const at::Tensor x = torch::randn({2, 5, 13}).requires_grad_(true);
    const at::Tensor y = linear(x, weight, bias);
    ASSERT_EQ(y.scalar_type(), at::kFloat);
    const at::Tensor xd = x.detach().to(at::kDouble);
    const at::Tensor expected = at::matmul(xd, dequantized_here.t()) + bias.to(at::kDouble);
    const double size = expected.abs().max().item<double>();
    EXPECT_LE((y.to(at::kDouble) - expected).abs().max().item<double>(), 1e-5 * size);
    // Against the fp32 weight: |x (w - q s)^T| <= sum_j |x_j| s_i / 2 for output i.
    const at::Tensor exact = at::matmul(xd, original.to(at::kDouble).t()) + bias.to(at::kDouble);
    const at::Tensor bound =
        at::matmul(xd.abs(), (q.scales.to(at::kDouble) / 2).unsqueeze(0).expand({13, 7}));
    EXPECT_TRUE(
        ((y.to(at::kDouble) - exact).abs() <= bound * (1 + 1e-5) + 1e-5 * size).all().item<bool>());
    // The input's gradient goes through the dequantized weight too.
    y.sum().backward();
    const at::Tensor dx = dequantized_here.sum(0).expand({2, 5, 13});
    EXPECT_LE((x.grad().to(at::kDouble) - dx).abs().max().item<double>(),
              1e-5 * dx.abs().max().item<double>());
  }
  handle.reset();
  EXPECT_FALSE(int8_scales(weight).defined());
}

}  // namespace
}  // namespace kiln
