// model.kernels: whether a model runs Kiln's own fused CPU kernels (core/kernels/fused_*.h) where
// it has them, or LibTorch's sequence of ops. Both compute the same function (the fused kernels are
// tested against the op sequence to 1e-5); the fused path is the default where it was measured
// faster (docs/benchmarks.md). Unhashed, like activation checkpointing: it changes speed, and the
// numbers only by float rounding.
#pragma once

#include <vector>

#include "core/config/params.h"

namespace kiln {

// A model's parameters and, after them, model.kernels ("fused" or "torch").
std::vector<ParamSpec> with_kernel_choice(std::vector<ParamSpec> model_params);

// Whether the model params `p` ask for the fused kernels.
bool uses_fused_kernels(const Params& p);

}  // namespace kiln
