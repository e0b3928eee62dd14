// AdamW's update of one float32 CPU parameter in a single pass over its memory: each element of
// the parameter, its gradient and its two moments is read once and the parameter and moments are
// written once, where torch::optim::AdamW on LibTorch 1.13 runs about ten whole-tensor ops (each a
// read and a write of the parameter's size). The arithmetic is AdamW's as LibTorch's C++ frontend
// writes it (decoupled decay first, then the moments, the bias corrections and the step), in
// float32 with the scalars rounded to float once, so a run can switch between this and the
// unfused optimizer at a snapshot (tests/unit/api/optimizer_test.cpp checks both against an
// independent double-precision AdamW).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace kiln {

struct AdamWHyper {
  double lr = 0, beta1 = 0, beta2 = 0, weight_decay = 0, eps = 0;
};

// One step, number `step` (1 for the first), of `param` with `grad`, updating the moments in
// place. All four are float32, contiguous, on the CPU and of one size (a c10::Error otherwise).
void fused_adamw_cpu(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
                     const at::Tensor& exp_avg_sq, int64_t step, const AdamWHyper& hyper);

}  // namespace kiln
