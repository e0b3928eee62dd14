// precision "fp16": autocast to float16 plus dynamic loss scaling (core/train/loss_scaler.h).
// Gradients are unscaled before clipping, so grad_clip and the logged norm mean the same as in
// fp32; a step with inf/NaN gradients is skipped and recorded. Made for CUDA; on the CPU it is
// slow, but lets the tests run the loss scaling end to end.

#include "core/api/precision.h"
#include "core/train/loss_scaler.h"
#include "core/util/error.h"
#include "core/util/torch_compat.h"

namespace kiln {
namespace {

class Fp16 : public PrecisionPolicy {
 public:
  Fp16(c10::DeviceType device, LossScalerOptions options) : device_(device), scaler_(options) {}

  std::unique_ptr<Scope> forward_scope() override {
    struct Autocast : Scope {
      Autocast(c10::DeviceType d, at::ScalarType dtype) : guard(d, dtype) {}
      compat::AutocastGuard guard;
    };
    return std::make_unique<Autocast>(device_, compute_dtype());
  }
  at::ScalarType compute_dtype() const override { return at::kHalf; }
  at::Tensor scale_loss(const at::Tensor& loss) override { return scaler_.scale(loss); }
  bool prepare_step(const std::vector<at::Tensor>& parameters) override {
    return scaler_.unscale_and_update(parameters);
  }
  double loss_scale() const override { return scaler_.current_scale(); }
  bool inspects_gradients() const override { return true; }
  std::map<std::string, double> state() const override { return scaler_.state(); }
  void load_state(const std::map<std::string, double>& state) override {
    scaler_.load_state(state);
  }

 private:
  c10::DeviceType device_;
  LossScaler scaler_;
};

const bool registered = PrecisionRegistry::add(
    {"fp16",
     "autocast to float16 with dynamic loss scaling (CUDA; the CPU too, slowly)",
     {ParamSpec::real("init_scale", 65536.0, "first loss scale (2^16)").at_least(1),
      ParamSpec::integer("growth_interval", 2000, "clean steps before the scale doubles")
          .at_least(1),
      ParamSpec::real("growth_factor", 2.0, "scale multiplier after growth_interval clean steps")
          .at_least(1),
      ParamSpec::real("backoff_factor", 0.5, "scale multiplier after an overflow")
          .at_least(0.0001)
          .at_most(1),
      ParamSpec::real("min_scale", 1.0, "the scale never falls below this").at_least(0)}},
    [](const Params& p, c10::DeviceType device) -> std::shared_ptr<PrecisionPolicy> {
      LossScalerOptions options{p.real("init_scale"), p.real("growth_factor"),
                                p.real("backoff_factor"), p.integer("growth_interval"),
                                p.real("min_scale")};
      return std::make_shared<Fp16>(device, options);
    });

}  // namespace
}  // namespace kiln
