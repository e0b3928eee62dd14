// Values attached to a model's weights by what adapts them (low-rank adapter sites, an int8
// base's scales), found by the weight itself (its TensorImpl), so that linear() finds them and no
// model names an adapter. Written when an adapter attaches or goes and while a run is assembled;
// read by every linear layer's forward and backward, on OpenMP's or a pipeline's threads too. A
// value changes only where no other thread reads it (assembly, or the thread running its layer).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <utility>

#include <ATen/core/Tensor.h>

namespace kiln {

template <class Value>
class WeightRegistry {
 public:
  // The value registered for `weight`, or null; valid while its registration lives.
  const Value* find(const at::Tensor& weight) {
    if (empty()) return nullptr;  // a model with nothing registered pays one load per layer
    std::shared_lock lock(mutex_);
    const auto it = values_.find(weight.unsafeGetTensorImpl());
    return it == values_.end() ? nullptr : &it->second;
  }

  // Calls change(value) on the value registered for `weight`; false when there is none.
  template <class Change>
  bool update(const at::Tensor& weight, Change&& change) {
    std::unique_lock lock(mutex_);
    const auto it = values_.find(weight.unsafeGetTensorImpl());
    if (it == values_.end()) return false;
    change(it->second);
    return true;
  }

  // Registers `value` for `weight` until the returned handle is destroyed (the registry outlives
  // every handle); a std::logic_error `twice` when `weight` has a value already.
  std::shared_ptr<void> add(const at::Tensor& weight, Value value, const char* twice) {
    const void* key = weight.unsafeGetTensorImpl();
    {
      std::unique_lock lock(mutex_);
      if (!values_.emplace(key, std::move(value)).second) throw std::logic_error(twice);
      count_.store(values_.size(), std::memory_order_release);
    }
    return std::shared_ptr<void>(const_cast<void*>(key), [this](void* gone) {
      std::unique_lock lock(mutex_);
      values_.erase(gone);
      count_.store(values_.size(), std::memory_order_release);
    });
  }

  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }

 private:
  std::shared_mutex mutex_;
  std::map<const void*, Value> values_;
  std::atomic<size_t> count_{0};  // values_.size(), read without the lock
};

}  // namespace kiln
