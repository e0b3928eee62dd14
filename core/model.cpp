#include "core/model.h"

#include "core/error.h"

namespace kiln {

torch::Tensor Model::forward(const torch::Tensor& tokens) {
  torch::Tensor x = tokens;
  for (const auto& layer : layers_)
    x = layer->forward(x);
  return x;
}

int64_t Model::parameter_count() const {
  int64_t total = 0;
  for (const auto& p : parameters())
    total += p.numel();
  return total;
}

double Model::flops_per_token(int64_t /*seq_len*/) const {
  return 6.0 * static_cast<double>(parameter_count());
}

std::vector<std::pair<std::string, torch::Tensor>> Model::export_weights() const {
  throw UserError("this model type has no interchange format to export to");
}

void Model::import_weights(const std::map<std::string, torch::Tensor>&) {
  throw UserError("this model type cannot load model.init_from weights");
}

}  // namespace kiln
