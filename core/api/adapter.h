// Adapters: small trainable weights added to a model whose own weights stay frozen ([adapter];
// "none" trains every weight). An adapter plugin attaches its parameters to a built model as a
// submodule named "adapter" (so snapshots save them by name, beside the frozen weights) and
// turns off the gradients of every other parameter, so that the optimizer, gradient clipping and
// every strategy see only the adapter's.
//
// A low-rank adapter adds to a linear layer y = x W^T + b the term s (drop(x) A^T) B^T. Models
// call Kiln's linear() (core/api/onednn_linear.h) for their linear layers, which looks up the
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
#include "core/config/registry.h"

namespace kiln {

// One adapted linear layer: y += scale * (dropout(x) a^T) b^T, a [rank, in] and b [out, rank].
struct LowRankSite {
  at::Tensor a, b;
  double scale = 1;
  double dropout = 0;
  int64_t dropout_site = 0;        // the draw site of its dropout (core/api/dropout.h)
  std::function<bool()> training;  // whether the model is in training mode
};

// The site registered for `weight` (by its TensorImpl), or null: asked by linear().
const LowRankSite* low_rank_site(const at::Tensor& weight);
// Registers `site` for `weight` until the returned handle is destroyed (the adapter module
// holds it, so a model destroyed takes its sites with it).
std::shared_ptr<void> register_low_rank_site(const at::Tensor& weight, LowRankSite site);

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
