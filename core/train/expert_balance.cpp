#include "core/train/expert_balance.h"

#include <vector>

#include <ATen/ATen.h>

#include "core/api/model.h"
#include "core/api/parallel.h"
#include "core/layers/moe.h"

namespace kiln {

void balance_expert_biases(Model& model, ParallelStrategy& parallel) {
  std::vector<MixtureOfExpertsImpl*> balanced;
  std::vector<at::Tensor> loads;
  for (const auto& module : model.modules(/*include_self=*/false)) {
    auto* moe = dynamic_cast<MixtureOfExpertsImpl*>(module.get());
    if (moe == nullptr || !moe->routing_bias.defined()) continue;
    balanced.push_back(moe);
    loads.push_back(moe->take_loads());
  }
  if (balanced.empty()) return;
  // The loads of the whole step's batch, as DeepSeek-V3 counts them: every rank's tokens.
  const at::Tensor summed = parallel.sum(at::stack(loads));
  for (size_t i = 0; i < balanced.size(); ++i)
    balanced[i]->balance_bias(summed[static_cast<int64_t>(i)]);
}

}  // namespace kiln
