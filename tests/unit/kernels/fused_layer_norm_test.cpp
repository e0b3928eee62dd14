// The fused residual add + LayerNorm (core/kernels/fused_layer_norm.h) against LayerNorm written
// out here from its definition in double precision, and against LibTorch's add and layer_norm:
// outputs and the gradients of all four inputs, at widths that are and are not multiples of the
// kernel's eight lanes, with and without a bias, with gradients flowing into h, the norm, or both.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "core/kernels/fused_layer_norm.h"
#include "tensor_compare.h"

namespace kiln {
namespace {

using testing::max_difference;

struct Inputs {
  at::Tensor x, a, weight, bias;
};

// {h, norm} and the four gradients, from `upstream_h` and `upstream_n` (either may be undefined),
// computed by `f` on copies of `in` converted to `dtype`.
template <class F>
std::vector<at::Tensor> run(F f, const Inputs& in, at::ScalarType dtype,
                            const at::Tensor& upstream_h, const at::Tensor& upstream_n) {
  auto leaf = [&](const at::Tensor& t) {
    return t.defined() ? t.detach().to(dtype).requires_grad_() : at::Tensor();
  };
  Inputs l{leaf(in.x), leaf(in.a), leaf(in.weight), leaf(in.bias)};
  auto [h, n] = f(l);
  std::vector<at::Tensor> outputs, upstream;
  if (upstream_h.defined()) outputs.push_back(h), upstream.push_back(upstream_h.to(dtype));
  if (upstream_n.defined()) outputs.push_back(n), upstream.push_back(upstream_n.to(dtype));
  std::vector<at::Tensor> wrt = {l.x, l.a, l.weight};
  if (l.bias.defined()) wrt.push_back(l.bias);
  auto grads = torch::autograd::grad(outputs, wrt, upstream, {}, false, /*allow_unused=*/true);
  std::vector<at::Tensor> all = {h, n};
  all.insert(all.end(), grads.begin(), grads.end());
  return all;
}

std::pair<at::Tensor, at::Tensor> by_definition(const Inputs& in, double eps) {
  at::Tensor h = in.x + in.a;
  at::Tensor mean = h.mean(-1, true), var = (h - mean).pow(2).mean(-1, true);
  at::Tensor n = (h - mean) / at::sqrt(var + eps) * in.weight;
  return {h, in.bias.defined() ? n + in.bias : n};
}

void expect_matches(int64_t width, bool bias, bool into_h, bool into_n, double eps = 1e-5) {
  SCOPED_TRACE(::testing::Message() << "width " << width << " bias " << bias << " into h " << into_h
                                    << " into norm " << into_n << " eps " << eps);
  at::manual_seed(width);
  Inputs in{at::randn({3, 5, width}) * 2 + 0.5, at::randn({3, 5, width}), at::randn({width}) + 1,
            bias ? at::randn({width}) : at::Tensor()};
  const at::Tensor up_h = into_h ? at::randn({3, 5, width}) : at::Tensor();
  const at::Tensor up_n = into_n ? at::randn({3, 5, width}) : at::Tensor();
  auto fused =
      run([eps](const Inputs& l) { return add_layer_norm(l.x, l.a, l.weight, l.bias, eps, true); },
          in, at::kFloat, up_h, up_n);
  auto torch_ops =
      run([eps](const Inputs& l) { return add_layer_norm(l.x, l.a, l.weight, l.bias, eps, false); },
          in, at::kFloat, up_h, up_n);
  auto exact =
      run([eps](const Inputs& l) { return by_definition(l, eps); }, in, at::kDouble, up_h, up_n);
  ASSERT_EQ(fused.size(), exact.size());
  for (size_t i = 0; i < exact.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "output " << i << " of h, norm, dx, da, dw, db");
    if (!exact[i].defined()) {
      EXPECT_FALSE(fused[i].defined() && fused[i].abs().max().item<double>() > 0);
      continue;
    }
    ASSERT_TRUE(fused[i].defined());
    const double scale = 1 + exact[i].abs().max().item<double>();
    EXPECT_LT(max_difference(fused[i], exact[i]) / scale, 1e-5);
    EXPECT_LT(max_difference(torch_ops[i], exact[i]) / scale, 1e-5);  // the reference holds
  }
}

TEST(FusedAddLayerNorm, OutputsAndGradientsMatchTheDefinitionAndLibTorchsOps) {
  for (int64_t width : {8, 37, 128}) {
    for (bool bias : {true, false}) {
      expect_matches(width, bias, /*into_h=*/true, /*into_n=*/true);
    }
  }
  expect_matches(37, true, /*into_h=*/false, /*into_n=*/true);
  expect_matches(37, true, /*into_h=*/true, /*into_n=*/false);
  expect_matches(37, true, /*into_h=*/true, /*into_n=*/true, /*eps=*/0.5);  // a checkpoint's own
}

TEST(FusedAddLayerNorm, OtherTypesKeepLibTorchsOps) {
  const at::Tensor x = at::randn({2, 16});
  EXPECT_TRUE(fused_add_layer_norm_applies(x, x));
  EXPECT_FALSE(fused_add_layer_norm_applies(x.to(at::kBFloat16), x.to(at::kBFloat16)));
  EXPECT_FALSE(fused_add_layer_norm_applies(x, at::randn({1, 16})));  // a broadcast add
}

}  // namespace
}  // namespace kiln
