// schedule "inverse_sqrt": the original Transformer's schedule. Linear warmup to lr, then
// lr x sqrt(warmup / (step + 1)), continuous at the end of warmup.
#include <algorithm>
#include <cmath>

#include "core/api/schedule.h"

namespace kiln {
namespace {

class InverseSqrt : public Schedule {
 public:
  InverseSqrt(double lr, int64_t warmup) : lr_(lr), warmup_(warmup) {}

  double lr(int64_t step) const override {
    if (step < warmup_) return lr_ * warmup_factor(step, warmup_);
    return lr_ * std::sqrt(static_cast<double>(std::max<int64_t>(warmup_, 1)) /
                           static_cast<double>(step + 1));
  }

 private:
  double lr_;
  int64_t warmup_;
};

const bool registered = ScheduleRegistry::add(
    {"inverse_sqrt",
     "linear warmup, then lr x sqrt(warmup / step)",
     {ParamSpec::integer("warmup", 100, "steps of linear warmup from lr/warmup to lr")
          .at_least(0)}},
    [](const Params& p, double base_lr, int64_t) -> std::shared_ptr<Schedule> {
      return std::make_shared<InverseSqrt>(base_lr, p.integer("warmup"));
    });

}  // namespace
}  // namespace kiln
