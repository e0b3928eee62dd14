// schedule "cosine": linear warmup to the base lr, then half a cosine down to
// min_lr_ratio x lr at the last step, and the minimum after it (as nanoGPT / build-nanogpt).
#include <cmath>

#include <fmt/format.h>

#include "core/api/schedule.h"
#include "core/util/error.h"

namespace kiln {
namespace {

class Cosine : public Schedule {
 public:
  Cosine(double max_lr, double min_lr, int64_t warmup, int64_t decay_end)
      : max_lr_(max_lr), min_lr_(min_lr), warmup_(warmup), decay_end_(decay_end) {}

  double lr(int64_t step) const override {
    if (step < warmup_) return max_lr_ * warmup_factor(step, warmup_);
    if (step > decay_end_) return min_lr_;
    const double progress =
        static_cast<double>(step - warmup_) / static_cast<double>(decay_end_ - warmup_);
    const double coeff = 0.5 * (1.0 + std::cos(M_PI * progress));  // 1 -> 0
    return min_lr_ + coeff * (max_lr_ - min_lr_);
  }

 private:
  double max_lr_, min_lr_;
  int64_t warmup_, decay_end_;
};

const bool registered = ScheduleRegistry::add(
    {"cosine",
     "linear warmup, then cosine decay to min_lr_ratio x lr at train.steps",
     {ParamSpec::integer("warmup", 0, "steps of linear warmup from lr/warmup to lr").at_least(0),
      ParamSpec::real("min_lr_ratio", 0.1, "final lr as a fraction of the peak")
          .at_least(0)
          .at_most(1)}},
    [](const Params& p, double base_lr, int64_t total_steps) -> std::shared_ptr<Schedule> {
      const int64_t warmup = p.integer("warmup");
      if (warmup >= total_steps) {
        throw ParamError("warmup",
                         fmt::format("schedule.warmup = {} must be smaller than train.steps = {} "
                                     "for the cosine to have steps to decay over",
                                     warmup, total_steps));
      }
      return std::make_shared<Cosine>(base_lr, base_lr * p.real("min_lr_ratio"), warmup,
                                      total_steps);
    });

}  // namespace
}  // namespace kiln
