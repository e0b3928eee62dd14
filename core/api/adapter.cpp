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

}  // namespace kiln
