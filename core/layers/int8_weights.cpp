#include "core/layers/int8_weights.h"

#include <stdexcept>
#include <utility>

#include <ATen/ATen.h>

#include "core/layers/weight_registry.h"

namespace kiln {
namespace {

WeightRegistry<at::Tensor>& scale_registry() {
  static auto* const registry = new WeightRegistry<at::Tensor>();  // outlives every model
  return *registry;
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
  return scale_registry().add(weight, std::move(scales), "an int8 weight registered twice");
}

at::Tensor int8_scales(const at::Tensor& weight) {
  const at::Tensor* found = scale_registry().find(weight);
  return found ? *found : at::Tensor();
}

void set_int8_scales(const at::Tensor& weight, at::Tensor scales) {
  if (!scale_registry().update(weight, [&](at::Tensor& kept) { kept = std::move(scales); })) {
    throw std::logic_error("set_int8_scales: no such int8 weight");
  }
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
