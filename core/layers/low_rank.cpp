#include "core/layers/low_rank.h"

#include <stdexcept>
#include <utility>

#include "core/layers/weight_registry.h"

namespace kiln {
namespace {

WeightRegistry<LowRankSite>& sites() {
  static auto* const registry = new WeightRegistry<LowRankSite>();  // outlives every model
  return *registry;
}

}  // namespace

const LowRankSite* low_rank_site(const at::Tensor& weight) {
  return sites().find(weight);
}

std::shared_ptr<void> register_low_rank_site(const at::Tensor& weight, LowRankSite site) {
  return sites().add(weight, std::move(site), "a linear layer's weight holds two adapters");
}

std::vector<at::Tensor> with_low_rank_parameters(std::vector<at::Tensor> weights) {
  const size_t own = weights.size();
  for (size_t i = 0; i < own; ++i) {
    if (const LowRankSite* site = low_rank_site(weights[i])) {
      weights.push_back(site->a);
      weights.push_back(site->b);
    }
  }
  return weights;
}

LowRankSplits split_low_rank_sites(torch::nn::Module& model,
                                   const std::vector<ParameterSplit>& layer_splits,
                                   const TensorParallelGroup& group) {
  LowRankSplits out;
  if (sites().empty()) return out;
  const auto parameters = model.named_parameters();
  const auto name_of = [&](const at::Tensor& t) {
    for (const auto& item : parameters) {
      if (item.value().unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return item.key();
    }
    throw std::logic_error("tensor parallel: an adapter tensor is not the model's parameter");
  };
  for (const ParameterSplit& split : layer_splits) {
    sites().update(parameters[split.name], [&](LowRankSite& site) {
      if (split.dim == 0) {  // column-parallel: B [out, rank] by rows, as W
        out.splits.push_back({name_of(site.b), 0, split.blocks});
        out.summed.push_back(site.a);
      } else if (split.dim == 1 && split.blocks == 1) {  // row-parallel: A [rank, in] by columns
        out.splits.push_back({name_of(site.a), 1, 1});
        out.summed.push_back(site.b);
        site.input_whole = site.a.size(1);
        site.input_start = group.rank * (site.input_whole / group.size);
      } else {
        throw std::logic_error(
            "tensor parallel: an adapted weight cut in a way adapters do not follow");
      }
    });
  }
  keep_slices(model, out.splits, group);
  return out;
}

}  // namespace kiln
