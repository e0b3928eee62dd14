// Tensor parallelism as a model sees it (Megatron-LM's split; parallel.type = "tensor"): the
// ranks of one tensor-parallel group each hold a slice of the attention heads and of the MLP's
// hidden units. A column-parallel layer (q, k, v; the MLP's input projection) keeps its rank's
// rows of the weight and reads the whole input through `enter`; a row-parallel layer (the
// attention and MLP output projections) keeps its rank's columns and its partial output is
// summed over the group by `leave`. Everything else (embeddings, norms, the head, row-parallel
// biases) is replicated: Megatron's pairing keeps those gradients equal on every rank of the
// group, so they need no extra communication.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}

namespace kiln {

// A model outside tensor parallelism holds the default group: one rank, enter and leave the
// identity, so that its forward needs no second path.
struct TensorParallelGroup {
  int rank = 0;  // this process's place in its tensor-parallel group
  int size = 1;  // ranks in the group (parallel.tp)
  // Identity forward, gradient summed over the group in backward (Megatron's f): the input of
  // column-parallel layers.
  std::function<at::Tensor(const at::Tensor&)> enter = [](const at::Tensor& x) { return x; };
  // Sum over the group forward, identity backward (Megatron's g): the output of row-parallel
  // layers, before their (replicated) bias is added.
  std::function<at::Tensor(const at::Tensor&)> leave = [](const at::Tensor& x) { return x; };
};

// How one parameter was cut: along `dim` into `size` equal slices, rank r keeping the r-th. A
// tensor made of `blocks` stacked parts along `dim` (gpt's fused q, k, v: 3) is cut part by
// part: rank r keeps the r-th slice of each part, in order. Parameters not listed are
// replicated.
struct ParameterSplit {
  std::string name;  // as Model::named_parameters() spells it
  int64_t dim = 0;
  int64_t blocks = 1;
};

// This rank's slice of `whole` (a copy, contiguous), cut as `split` says over `size` ranks.
at::Tensor slice_for_rank(const at::Tensor& whole, const ParameterSplit& split, int rank, int size);
// The whole tensor again from every rank's slice (slices[r] is rank r's): slice_for_rank undone.
at::Tensor whole_from_slices(const std::vector<at::Tensor>& slices, const ParameterSplit& split);
// Gives each parameter of `model` named in `splits` its slice for `group.rank` as its data (the
// same parameter, so optimizers and hooks made later see the slice). A parameter a split names
// but the model lacks is a logic error (std::logic_error).
void keep_slices(torch::nn::Module& model, const std::vector<ParameterSplit>& splits,
                 const TensorParallelGroup& group);

}  // namespace kiln
