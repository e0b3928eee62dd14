// Precision policies decide the number formats of the forward pass and guard the update:
// fp32 does nothing; mixed-precision policies autocast the forward pass and may scale the loss
// (and skip steps whose gradients overflowed).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>

#include "core/registry.h"

namespace kiln {

class PrecisionPolicy {
 public:
  struct Scope {
    virtual ~Scope() = default;
  };
  virtual ~PrecisionPolicy() = default;
  // Held around forward and loss; an autocast guard for mixed precision.
  virtual std::unique_ptr<Scope> forward_scope() { return nullptr; }
  virtual at::Tensor scale_loss(const at::Tensor& loss) { return loss; }
  // Called after backward, before clipping: unscale gradients in place; false = skip this step.
  virtual bool prepare_step(const std::vector<at::Tensor>& parameters) {
    (void)parameters;
    return true;
  }
  virtual double loss_scale() const { return 1.0; }
  // Whether prepare_step inspects the gradients (and so needs all of them on every rank).
  virtual bool inspects_gradients() const { return false; }
  // What a snapshot keeps of the policy (a loss scale, say) and gives back on resume.
  virtual std::map<std::string, double> state() const { return {}; }
  virtual void load_state(const std::map<std::string, double>& state) { (void)state; }
};

struct PrecisionKind {
  static constexpr const char* name = "precision";
  using Product = PrecisionPolicy;
  using Factory =
      std::function<std::shared_ptr<PrecisionPolicy>(const Params&, c10::DeviceType device)>;
};
using PrecisionRegistry = Registry<PrecisionKind>;

}  // namespace kiln
