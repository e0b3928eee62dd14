#include "core/layers/linear.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "core/layers/dropout.h"
#include "core/layers/int8_weights.h"
#include "core/layers/low_rank.h"

namespace kiln {
namespace {

// A frozen weight as the operand of a product in `type`: int8 dequantized (q s, in fp32), bf16
// widened.
at::Tensor operand_weight(const at::Tensor& weight, at::ScalarType type) {
  return (weight.scalar_type() == at::kChar ? dequantized(weight) : weight).to(type);
}

// y = x w^T for a frozen weight kept narrower than x (adapter.base_dtype): widened for the
// forward product and again for backward's, and saved as it is, since saving the widened copy
// would hold every layer's fp32 weight until backward, the very memory the narrow base saves.
// The weight has no gradient.
struct NarrowFrozenLinear : torch::autograd::Function<NarrowFrozenLinear> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight) {
    ctx->save_for_backward({weight});
    return at::linear(x, operand_weight(weight, x.scalar_type()));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor& dy = grads[0];
    const at::Tensor w = operand_weight(ctx->get_saved_variables()[0], dy.scalar_type());
    return {ctx->needs_input_grad(0) ? at::matmul(dy, w) : at::Tensor(), at::Tensor()};
  }
};

bool narrow_frozen(const at::Tensor& x, const at::Tensor& weight) {
  const auto type = weight.scalar_type();
  return type == at::kChar ||
         (type == at::kBFloat16 && !weight.requires_grad() && x.scalar_type() != at::kBFloat16);
}

}  // namespace

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  at::Tensor y;
  if (narrow_frozen(x, weight)) {
    y = NarrowFrozenLinear::apply(x, weight);
    if (bias.defined()) y = y + bias;
  } else {
    y = at::linear(x, weight, bias);
  }
  const LowRankSite* site = low_rank_site(weight);
  if (!site) return y;
  const SliceOf input = site->input_whole == 0
                            ? SliceOf{}
                            : SliceOf{x.dim() - 1, site->input_start, site->input_whole};
  const at::Tensor dropped = dropout(x, site->dropout, site->training(), site->dropout_site, input);
  const at::Tensor low = linear(linear(dropped, site->a, at::Tensor()), site->b, at::Tensor());
  return y + low * site->scale;
}

}  // namespace kiln
