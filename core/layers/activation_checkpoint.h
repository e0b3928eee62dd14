// Activation checkpointing: a block run this way keeps only its input for the backward pass and
// computes its forward pass a second time there, trading about one more forward pass of compute
// for the block's activations (what autograd would otherwise hold from forward to backward).
// LibTorch's C++ API has no torch.utils.checkpoint; this is its reentrant variant.
//
// The models that offer it (gpt, transformer_lm, llama) declare its two keys through
// with_activation_checkpointing() and ask checkpoints_block() which of their blocks to run through
// checkpointed().
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/config/params.h"

namespace kiln {

// `block(x)`, its intermediate tensors dropped: backward runs `block` again, with the random
// number generators (the CPU's, and the CUDA device's when x is on one) and autocast as they were
// in this forward pass, and Kiln's dropout key (core/layers/random_draws.h), so dropout draws the
// same masks and the recomputed activations are those of the first pass bit for bit. The
// gradients of the block's parameters accumulate into their .grad during that backward, as an
// unchecked block's would. Where autograd is off (evaluation, sampling) this is just block(x).
at::Tensor checkpointed(const std::function<at::Tensor(const at::Tensor&)>& block,
                        const at::Tensor& x);

// A model's parameters and, after them, model.activation_checkpointing ("none", "full",
// "every_n") and model.activation_checkpointing_every (the n of "every_n"). Both unhashed: they
// trade memory for time and leave every number of the run as it is.
std::vector<ParamSpec> with_activation_checkpointing(std::vector<ParamSpec> model_params);

// Whether block `index` (0 = the first) is checkpointed under the model params `p`: none of them,
// all of them, or blocks 0, n, 2n, ...
bool checkpoints_block(const Params& p, int64_t index);

}  // namespace kiln
