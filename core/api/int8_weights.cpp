#include "core/api/int8_weights.h"

#include <atomic>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>

#include <ATen/ATen.h>

namespace kiln {
namespace {

// Written when an adapter attaches or goes (and when tensor parallelism cuts a weight), read by
// every int8 layer's forward and backward, on OpenMP's or a pipeline's threads too.
struct ScaleTable {
  std::shared_mutex mutex;
  std::map<const void*, at::Tensor> scales;
};

ScaleTable& table() {
  static ScaleTable* const t = new ScaleTable();  // outlives every model, whatever the exit order
  return *t;
}

}  // namespace

Int8Rows quantize_rows(const at::Tensor& weight) {
  at::NoGradGuard no_grad;
  const at::Tensor w = weight.to(at::kFloat);
  at::Tensor scales = w.abs().amax(1).div_(127.0);
  scales.masked_fill_(scales == 0, 1.0);
  at::Tensor values = w.div(scales.unsqueeze(1)).round_().clamp_(-127, 127).to(at::kChar);
  return {values, scales};
}

std::shared_ptr<void> register_int8_scales(const at::Tensor& weight, at::Tensor scales) {
  const void* key = weight.unsafeGetTensorImpl();
  ScaleTable& t = table();
  {
    std::unique_lock lock(t.mutex);
    if (!t.scales.emplace(key, std::move(scales)).second) {
      throw std::logic_error("an int8 weight registered twice");
    }
  }
  return std::shared_ptr<void>(const_cast<void*>(key), [](void* gone) {
    ScaleTable& t = table();
    std::unique_lock lock(t.mutex);
    t.scales.erase(gone);
  });
}

at::Tensor int8_scales(const at::Tensor& weight) {
  ScaleTable& t = table();
  std::shared_lock lock(t.mutex);
  const auto it = t.scales.find(weight.unsafeGetTensorImpl());
  return it == t.scales.end() ? at::Tensor() : it->second;
}

void set_int8_scales(const at::Tensor& weight, at::Tensor scales) {
  ScaleTable& t = table();
  std::unique_lock lock(t.mutex);
  const auto it = t.scales.find(weight.unsafeGetTensorImpl());
  if (it == t.scales.end()) throw std::logic_error("set_int8_scales: no such int8 weight");
  it->second = std::move(scales);
}

at::Tensor dequantized(const at::Tensor& weight) {
  at::Tensor scales = int8_scales(weight);
  if (!scales.defined()) throw std::logic_error("an int8 weight without its scales");
  if (scales.device() != weight.device()) {  // the model moved to its device after attaching
    scales = scales.to(weight.device());
    set_int8_scales(weight, scales);
  }
  at::NoGradGuard no_grad;
  return weight.to(at::kFloat).mul_(scales.unsqueeze(1));
}

}  // namespace kiln
