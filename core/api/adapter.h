// Adapters: small trainable weights added to a model whose own weights stay frozen ([adapter];
// "none" trains every weight). An adapter plugin attaches its parameters to a built model as a
// submodule named "adapter" (so snapshots save them by name, beside the frozen weights) and
// turns off the gradients of every other parameter, so that the optimizer, gradient clipping and
// every strategy see only the adapter's.
//
// A low-rank adapter registers its sites by their base weight (core/layers/low_rank.h), which
// Kiln's linear() reads, so no model names an adapter.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/api/model.h"
#include "core/config/registry.h"

namespace kiln {

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
