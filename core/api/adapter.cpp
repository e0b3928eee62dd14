#include "core/api/adapter.h"

#include <set>
#include <utility>

#include <torch/nn/modules/linear.h>

namespace kiln {

std::vector<BlockLinear> block_linear_layers(const Model& model) {
  const auto& layers = model.layers();
  std::set<const void*> inner;  // the blocks' weights: not the embedding's, not the head's
  for (size_t i = 1; i + 1 < layers.size(); ++i) {
    for (const auto& p : layers[i]->parameters())
      inner.insert(p.unsafeGetTensorImpl());
  }
  const auto names = model.interchange_names();
  std::vector<BlockLinear> out;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const auto* linear = item.value()->as<torch::nn::Linear>();
    if (!linear || !inner.count(linear->weight.unsafeGetTensorImpl())) continue;
    BlockLinear layer{item.key(), item.key(), false, linear->weight};
    const auto known = names.find(item.key() + ".weight");
    if (known != names.end()) {
      const std::string& name = known->second.name;
      layer.interchange_name = name.substr(0, name.size() - std::string(".weight").size());
      layer.transposed = known->second.transposed;
    }
    out.push_back(std::move(layer));
  }
  return out;
}

}  // namespace kiln
