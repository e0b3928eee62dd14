// schedule "step": StepLR. The lr is multiplied by gamma every step_size steps (after warmup):
// lr x gamma^floor((step - warmup) / step_size). The seed Transformer recipe uses gamma 0.95
// once per epoch.
#include <cmath>

#include "core/api/schedule.h"

namespace kiln {
namespace {

class Step : public Schedule {
 public:
  Step(double lr, double gamma, int64_t step_size, int64_t warmup)
      : lr_(lr), gamma_(gamma), step_size_(step_size), warmup_(warmup) {}

  double lr(int64_t step) const override {
    if (step < warmup_) return lr_ * warmup_factor(step, warmup_);
    return lr_ * std::pow(gamma_, static_cast<double>((step - warmup_) / step_size_));
  }

 private:
  double lr_, gamma_;
  int64_t step_size_, warmup_;
};

const bool registered = ScheduleRegistry::add(
    {"step",
     "StepLR: multiply the lr by gamma every step_size steps",
     {ParamSpec::integer("step_size", 100, "steps between decays").at_least(1),
      ParamSpec::real("gamma", 0.95, "decay factor").at_least(0).at_most(1),
      ParamSpec::integer("warmup", 0, "steps of linear warmup from lr/warmup to lr").at_least(0)}},
    [](const Params& p, double base_lr, int64_t) -> std::shared_ptr<Schedule> {
      return std::make_shared<Step>(base_lr, p.real("gamma"), p.integer("step_size"),
                                    p.integer("warmup"));
    });

}  // namespace
}  // namespace kiln
