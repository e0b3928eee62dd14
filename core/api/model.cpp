#include "core/api/model.h"

#include <new>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "core/layers/kv_cache.h"
#include "core/util/error.h"

namespace kiln {

torch::Tensor Model::forward(const torch::Tensor& tokens) {
  torch::Tensor x = tokens;
  const KvCache* cache = active_kv_cache();
  for (size_t i = 0; i < layers_.size(); ++i) {
    // A cached read that wants the last position's logits: the head reads that position alone.
    if (cache && cache->last_logits_only() && i + 1 == layers_.size() && x.size(1) > 1)
      x = x.narrow(1, x.size(1) - 1, 1);
    x = runner_ ? runner_(i, *layers_[i], x) : layers_[i]->forward(x);
  }
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

std::vector<ParameterSplit> Model::split_for_tensor_parallel(const TensorParallelGroup&) {
  throw UserError("this model type has no tensor-parallel form: use parallel.type = \"ddp\"");
}

std::shared_ptr<Model> build_model(const ModelPlan& plan) {
  try {
    return plan.build();
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("model: cannot build {}: {}: make the model smaller",
                                plan.description, e.what_without_backtrace()));
  } catch (const std::bad_alloc&) {
    throw UserError(
        fmt::format("model: out of memory building {}: make the model smaller", plan.description));
  }
}

}  // namespace kiln
