// A step's gradients once they are whole across ranks and unscaled: their
// global norm and its clip (the trainer's step, core/train/trainer.h), and the
// fault point that spoils them.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace kiln {

class ParallelStrategy;

// The global L2 norm of the gradients of `parameters` over every rank
// (ParallelStrategy::global_norm), a 0-d tensor on `device`: no host sync. With
// max_norm > 0 the gradients are scaled down to it as
// torch.nn.utils.clip_grad_norm_ scales them. Parameters without a gradient are
// left out.
at::Tensor clip_gradients(const std::vector<at::Tensor>& parameters, ParallelStrategy& parallel,
                          const c10::Device& device, double max_norm);

// The first gradient's first element becomes inf (KILN_FAULT=grad.nonfinite,
// core/util/fault.h).
void poison_gradients(const std::vector<at::Tensor>& parameters);

}  // namespace kiln
