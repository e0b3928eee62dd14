#include "core/train/loss_scaler.h"

#include <algorithm>

#include <ATen/ATen.h>

namespace kiln {

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.init_scale) {}

bool LossScaler::unscale_and_update(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> grads, finite;
  for (const auto& p : parameters) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    finite.push_back(at::isfinite(p.grad()).all());
  }
  const bool ok = finite.empty() || at::stack(finite).all().item<bool>();
  if (ok) {
    for (auto& g : grads)
      g.mul_(1.0 / scale_);
  }
  update(!ok);
  return ok;
}

void LossScaler::update(bool found_nonfinite) {
  if (found_nonfinite) {
    scale_ = std::max(options_.min_scale, scale_ * options_.backoff_factor);
    clean_steps_ = 0;
    return;
  }
  if (++clean_steps_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    clean_steps_ = 0;
  }
}

std::map<std::string, double> LossScaler::state() const {
  return {{"loss_scale", scale_}, {"clean_steps", static_cast<double>(clean_steps_)}};
}

void LossScaler::load_state(const std::map<std::string, double>& state) {
  if (auto it = state.find("loss_scale"); it != state.end()) scale_ = it->second;
  if (auto it = state.find("clean_steps"); it != state.end()) {
    clean_steps_ = static_cast<int64_t>(it->second);
  }
}

}  // namespace kiln
