// schedule "linear": linear warmup, then a straight line from lr down to min_lr_ratio x lr at
// train.steps (the BERT / Hugging Face default).
#include <algorithm>

#include "core/api/schedule.h"

namespace kiln {
namespace {

class Linear : public Schedule {
 public:
  Linear(double lr, double min_ratio, int64_t warmup, int64_t steps)
      : lr_(lr), min_ratio_(min_ratio), warmup_(warmup), steps_(steps) {}

  double lr(int64_t step) const override {
    if (step < warmup_) return lr_ * warmup_factor(step, warmup_);
    const double progress =
        std::min(1.0, static_cast<double>(step - warmup_) /
                          static_cast<double>(std::max<int64_t>(1, steps_ - warmup_)));
    return lr_ * (1.0 - (1.0 - min_ratio_) * progress);
  }

 private:
  double lr_, min_ratio_;
  int64_t warmup_, steps_;
};

const bool registered = ScheduleRegistry::add(
    {"linear",
     "linear warmup, then linear decay to min_lr_ratio x lr at train.steps",
     {ParamSpec::integer("warmup", 0, "steps of linear warmup from lr/warmup to lr").at_least(0),
      ParamSpec::real("min_lr_ratio", 0.0, "final lr as a fraction of the peak")
          .at_least(0)
          .at_most(1)}},
    [](const Params& p, double base_lr, int64_t steps) -> std::shared_ptr<Schedule> {
      return std::make_shared<Linear>(base_lr, p.real("min_lr_ratio"), p.integer("warmup"), steps);
    });

}  // namespace
}  // namespace kiln
