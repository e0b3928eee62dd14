#include "core/api/optimizer.h"

#include <stdexcept>

#include "core/util/torch_compat.h"

namespace kiln {
namespace {

const DeclaredState& declared(const torch::optim::Optimizer& optimizer) {
  const auto* declares = dynamic_cast<const DeclaredState*>(&optimizer);
  if (!declares) {
    throw std::logic_error(
        "the optimizer does not declare its state (core/api/optimizer.h, DeclaredState)");
  }
  return *declares;
}

std::vector<torch::Tensor*> defined_tensors(const DeclaredState& declares,
                                            torch::optim::OptimizerParamState& entry) {
  std::vector<torch::Tensor*> out;
  for (torch::Tensor* t : declares.state_tensors(entry)) {
    if (t->defined()) out.push_back(t);
  }
  return out;
}

}  // namespace

std::vector<torch::Tensor*> parameter_state(torch::optim::Optimizer& optimizer,
                                            const torch::Tensor& param) {
  const DeclaredState& declares = declared(optimizer);
  auto found = optimizer.state().find(compat::optimizer_state_key(param));
  if (found == optimizer.state().end() || !found->second) return {};
  return defined_tensors(declares, *found->second);
}

int64_t optimizer_state_bytes(torch::optim::Optimizer& optimizer) {
  const DeclaredState& declares = declared(optimizer);
  int64_t bytes = 0;
  for (auto& [key, entry] : optimizer.state()) {
    if (!entry) continue;
    for (const torch::Tensor* t : defined_tensors(declares, *entry))
      bytes += static_cast<int64_t>(t->nbytes());
  }
  return bytes;
}

}  // namespace kiln
