#include "core/train/gradients.h"

#include <limits>

#include <ATen/ATen.h>

#include "core/api/parallel.h"

namespace kiln {

at::Tensor clip_gradients(const std::vector<at::Tensor>& parameters, ParallelStrategy& parallel,
                          const c10::Device& device, double max_norm) {
  std::vector<at::Tensor> norms;
  for (const auto& p : parameters) {
    if (p.grad().defined()) norms.push_back(p.grad().detach().to(at::kFloat).norm(2));
  }
  // Ranks that hold only a shard of the gradients (zero) see none at all in a
  // small model.
  at::Tensor local =
      norms.empty() ? at::zeros({}, at::TensorOptions().device(device)) : at::stack(norms).norm(2);
  at::Tensor total = parallel.global_norm(local);
  if (max_norm > 0) {
    // As torch.nn.utils.clip_grad_norm_: scale by max_norm / norm only when
    // that is below 1.
    at::Tensor coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
    for (const auto& p : parameters) {
      if (p.grad().defined()) p.grad().detach().mul_(coef.to(p.grad().dtype()));
    }
  }
  return total;
}

void poison_gradients(const std::vector<at::Tensor>& parameters) {
  for (const auto& p : parameters) {
    if (p.grad().defined()) {
      p.grad().view(-1)[0].fill_(std::numeric_limits<float>::infinity());
      return;
    }
  }
}

}  // namespace kiln
