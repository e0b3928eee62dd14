// Adapters: small trainable weights added to a model whose own weights stay frozen ([adapter];
// "none" trains every weight). An adapter plugin attaches its parameters to a built model as a
// submodule named "adapter" (so snapshots save them by name, beside the frozen weights) and
// turns off the gradients of every other parameter, so that the optimizer, gradient clipping and
// every strategy see only the adapter's.
//
// A low-rank adapter adds to a linear layer y = x W^T + b the term s (drop(x) A^T) B^T. Models
// call Kiln's linear() (core/api/linear.h) for their linear layers, which looks up the
// layer's weight in the table below: an adapter registers each site by its base weight, and no
// model names an adapter.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/api/model.h"
#include "core/api/tensor_parallel.h"
#include "core/config/registry.h"

namespace kiln {

// One adapted linear layer: y += scale * (dropout(x) a^T) b^T, a [rank, in] and b [out, rank].
struct LowRankSite {
  at::Tensor a, b;
  double scale = 1;
  double dropout = 0;
  int64_t dropout_site = 0;        // the draw site of its dropout (core/api/dropout.h)
  std::function<bool()> training;  // whether the model is in training mode
  // Under tensor parallelism a row-parallel layer reads a slice of its input: the features
  // [input_start, input_start + width) of `input_whole` (0: the whole input), so that its dropout
  // mask is that slice of the one process's.
  int64_t input_start = 0, input_whole = 0;
};

// The site registered for `weight` (by its TensorImpl), or null: asked by linear().
const LowRankSite* low_rank_site(const at::Tensor& weight);
// Registers `site` for `weight` until the returned handle is destroyed (the adapter module
// holds it, so a model destroyed takes its sites with it).
std::shared_ptr<void> register_low_rank_site(const at::Tensor& weight, LowRankSite site);

// `weights` followed by the adapter tensors (a, b) of those that hold a site: a layer's
// parameters as a strategy that places layers (pipeline stages) must see them.
std::vector<at::Tensor> with_low_rank_parameters(std::vector<at::Tensor> weights);

// Low-rank sites under tensor parallelism (core/api/tensor_parallel.h), cut to match their
// layer. A column-parallel layer keeps rows of W, so B keeps the same rows and A stays whole; a
// row-parallel layer keeps columns of W, so A keeps the same columns and B stays whole, and its
// partial output, the adapter's term included, is summed by the layer's `leave`. The whole
// tensor (A of a column layer, B of a row layer) then gets on each rank its part of the
// gradient, which the group must sum.
struct LowRankSplits {
  std::vector<ParameterSplit> splits;  // adapter tensors cut, by their name in the model
  std::vector<at::Tensor> summed;      // whole on every rank, gradients summed over the group
};
// Cuts the adapter tensors of the sites on the weights `layer_splits` cut (which keep_slices
// already applied to `model`) and gives row-parallel sites their input slice.
LowRankSplits split_low_rank_sites(torch::nn::Module& model,
                                   const std::vector<ParameterSplit>& layer_splits,
                                   const TensorParallelGroup& group);

// A linear layer of a model's blocks (not the embedding's, not the output head's), as an
// adapter targets it: Kiln's module path, the name of the module in the model's Hugging Face
// form (Kiln's path where it has none), and whether that form stores the weight transposed
// (GPT-2's Conv1D: PEFT's fan_in_fan_out).
struct BlockLinear {
  std::string path;
  std::string interchange_name;
  bool transposed = false;
  at::Tensor weight;
};
// The model's block linear layers, in module order.
std::vector<BlockLinear> block_linear_layers(const Model& model);

class Adapter {
 public:
  virtual ~Adapter() = default;
  // Whether it adds anything: "none" does not, and the model trains whole.
  virtual bool adapts() const { return false; }
  // Adds the adapter to `model` and freezes the model's own parameters. Called by assemble()
  // on the CPU, after model.init_from's weights are in and before the model moves to its device
  // and a strategy attaches it. `starts`: a run begins here, so the adapter reads its own start
  // (a folder it was given); false for eval, sample and export, which load a snapshot over it
  // and must not depend on that folder still being there.
  virtual void attach(Model& /*model*/, bool /*starts*/) {}
  // Why a model loaded from a snapshot needs model.init_from's weights in before attach(), or ""
  // when it does not: attach() computes from them what snapshots do not hold ("an int8 base's
  // scales are computed from them"). Asked by assemble(), which then reads them for eval, sample
  // and export too, and by those commands, which refuse a run whose base is gone or changed.
  virtual std::string needs_initial_weights() const { return {}; }
  // The fewest bytes a frozen weight of the model takes once attached (4: fp32), known before the
  // model is built: the memory check's floor counts the weights at this width.
  virtual int narrowest_weight_bytes() const { return 4; }
  // The adapter as Hugging Face PEFT writes one: adapter_config.json's text (with
  // `base_model` as base_model_name_or_path) and adapter_model.safetensors's tensors under
  // PEFT's names. Called by `kiln export` on a model a snapshot was loaded into.
  virtual std::string peft_config(const Model& /*model*/, const std::string& /*base_model*/) const {
    return {};
  }
  virtual std::vector<std::pair<std::string, at::Tensor>> peft_weights(
      const Model& /*model*/) const {
    return {};
  }
  // Folds the adapter into the model's own weights (W += scale * b a) and removes its sites, so
  // the model alone computes what the adapted model computed: `kiln export --merge`.
  virtual void merge(Model& /*model*/) {}
};

struct AdapterKind {
  static constexpr const char* name = "adapter";
  using Product = Adapter;
  using Factory = std::function<std::shared_ptr<Adapter>(const Params&)>;
};
using AdapterRegistry = Registry<AdapterKind>;

}  // namespace kiln
