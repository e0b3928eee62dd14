#include "core/api/adapter.h"

#include <atomic>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>

namespace kiln {
namespace {

// Written when an adapter attaches or goes, read by every linear layer's forward pass (on
// OpenMP's or a pipeline's threads too).
struct SiteTable {
  std::shared_mutex mutex;
  std::map<const void*, LowRankSite> sites;
  // sites.size(), read without the lock: a model with no adapter pays one load per layer.
  std::atomic<size_t> count{0};
};

SiteTable& table() {
  static SiteTable* const t = new SiteTable();  // outlives every model, whatever the exit order
  return *t;
}

}  // namespace

const LowRankSite* low_rank_site(const at::Tensor& weight) {
  SiteTable& t = table();
  if (t.count.load(std::memory_order_acquire) == 0) return nullptr;
  std::shared_lock lock(t.mutex);
  const auto it = t.sites.find(weight.unsafeGetTensorImpl());
  return it == t.sites.end() ? nullptr : &it->second;
}

std::shared_ptr<void> register_low_rank_site(const at::Tensor& weight, LowRankSite site) {
  const void* key = weight.unsafeGetTensorImpl();
  SiteTable& t = table();
  {
    std::unique_lock lock(t.mutex);
    if (!t.sites.emplace(key, std::move(site)).second) {
      throw std::logic_error("a linear layer's weight holds two adapters");
    }
    t.count.store(t.sites.size(), std::memory_order_release);
  }
  return std::shared_ptr<void>(const_cast<void*>(key), [](void* gone) {
    SiteTable& t = table();
    std::unique_lock lock(t.mutex);
    t.sites.erase(gone);
    t.count.store(t.sites.size(), std::memory_order_release);
  });
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
  if (table().count.load(std::memory_order_acquire) == 0) return out;
  const auto parameters = model.named_parameters();
  const auto name_of = [&](const at::Tensor& t) {
    for (const auto& item : parameters) {
      if (item.value().unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return item.key();
    }
    throw std::logic_error("tensor parallel: an adapter tensor is not the model's parameter");
  };
  std::unique_lock lock(table().mutex);
  for (const ParameterSplit& split : layer_splits) {
    const auto it = table().sites.find(parameters[split.name].unsafeGetTensorImpl());
    if (it == table().sites.end()) continue;
    LowRankSite& site = it->second;
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
  }
  lock.unlock();
  keep_slices(model, out.splits, group);
  return out;
}

}  // namespace kiln
