#include "core/distributed/tensor_parallel_ops.h"

#include <memory>
#include <utility>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/autograd.h>

#include "core/distributed/distributed.h"

namespace kiln {
namespace {

// The group's sum, carried through the autograd context to backward.
struct SumHolder : torch::CustomClassHolder {
  explicit SumHolder(GroupSum s) : sum(std::move(s)) {}
  GroupSum sum;
};

at::Tensor summed(const at::Tensor& x, const GroupSum& sum) {
  at::Tensor out = x.clone(at::MemoryFormat::Contiguous);
  sum(out);
  return out;
}

// Before a column-parallel layer: every rank already holds the whole input, but each rank's
// slice of the layer contributes only part of the input's gradient.
struct EnterFunction : torch::autograd::Function<EnterFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            c10::intrusive_ptr<SumHolder> holder) {
    ctx->saved_data["sum"] = c10::IValue::make_capsule(std::move(holder));
    return x;  // returned as a view, which gets this function as its gradient's source
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto capsule = ctx->saved_data["sum"].toCapsule();
    return {summed(grad_outputs[0], static_cast<SumHolder&>(*capsule).sum), at::Tensor()};
  }
};

// After a row-parallel layer: each rank's output is a partial sum; the whole output's gradient
// is what each partial receives.
struct LeaveFunction : torch::autograd::Function<LeaveFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            c10::intrusive_ptr<SumHolder> holder) {
    (void)ctx;
    return summed(x, holder->sum);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    (void)ctx;
    return {grad_outputs[0], at::Tensor()};
  }
};

}  // namespace

TensorParallelGroup tensor_parallel_group(int rank, int size, GroupSum sum) {
  auto holder = c10::make_intrusive<SumHolder>(std::move(sum));
  TensorParallelGroup group;
  group.rank = rank;
  group.size = size;
  group.enter = [holder](const at::Tensor& x) { return EnterFunction::apply(x, holder); };
  group.leave = [holder](const at::Tensor& x) { return LeaveFunction::apply(x, holder); };
  return group;
}

TensorParallelGroup tensor_parallel_group(Communicator& group) {
  return tensor_parallel_group(group.rank(), group.size(), [&group](at::Tensor& x) {
    // Gloo (LibTorch 1.13) has no bfloat16 sum, which bf16 autocast's activations need: summed
    // in float32 there, then rounded once.
    const bool widen = x.scalar_type() == at::kBFloat16 && group.backend() == "gloo";
    std::vector<at::Tensor> one = {widen ? x.to(at::kFloat) : x};
    group.all_reduce_sum(one);
    if (widen) x.copy_(one[0]);
  });
}

}  // namespace kiln
