// Dynamic loss scaling for fp16 training, as PyTorch's GradScaler and DeepSpeed's fp16 block:
// the loss is multiplied by a large scale so small gradients survive fp16's narrow range; before
// the update the gradients are divided back, and a step whose gradients overflowed to inf/NaN is
// skipped and the scale halved. After growth_interval clean steps in a row the scale doubles.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

namespace kiln {

struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  double min_scale = 1.0;
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options);

  at::Tensor scale(const at::Tensor& loss) const { return loss * scale_; }
  // Divides the gradients by the scale in place, unless some are inf/NaN; then updates the scale.
  // Returns false when the step must be skipped. One host sync (the finiteness verdict).
  bool unscale_and_update(const std::vector<at::Tensor>& parameters);

  double current_scale() const { return scale_; }
  int64_t clean_steps() const { return clean_steps_; }
  std::map<std::string, double> state() const;
  void load_state(const std::map<std::string, double>& state);

 private:
  void update(bool found_nonfinite);

  LossScalerOptions options_;
  double scale_;
  int64_t clean_steps_ = 0;
};

}  // namespace kiln
