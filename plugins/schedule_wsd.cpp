// schedule "wsd": warmup-stable-decay (MiniCPM, DeepSeek). Linear warmup, the peak lr held,
// then for the last decay_fraction of the run a linear fall to min_lr_ratio x lr. Unlike a
// cosine, the stable phase does not depend on the run length, so a run can be extended.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/api/schedule.h"
#include "core/util/error.h"

namespace kiln {
namespace {

class WarmupStableDecay : public Schedule {
 public:
  WarmupStableDecay(double lr, double min_ratio, int64_t warmup, int64_t decay_start, int64_t steps)
      : lr_(lr), min_ratio_(min_ratio), warmup_(warmup), decay_start_(decay_start), steps_(steps) {}

  double lr(int64_t step) const override {
    if (step < warmup_) return lr_ * warmup_factor(step, warmup_);
    if (step < decay_start_) return lr_;
    const double progress = std::min(
        1.0, static_cast<double>(step - decay_start_) / static_cast<double>(steps_ - decay_start_));
    return lr_ * (1.0 - (1.0 - min_ratio_) * progress);
  }

 private:
  double lr_, min_ratio_;
  int64_t warmup_, decay_start_, steps_;
};

const bool registered = ScheduleRegistry::add(
    {"wsd",
     "warmup, stable at lr, then linear decay over the last decay_fraction of the steps",
     {ParamSpec::integer("warmup", 0, "steps of linear warmup from lr/warmup to lr").at_least(0),
      ParamSpec::real("decay_fraction", 0.2, "share of train.steps spent decaying")
          .at_least(0)
          .at_most(1),
      ParamSpec::real("min_lr_ratio", 0.0, "final lr as a fraction of the peak")
          .at_least(0)
          .at_most(1)}},
    [](const Params& p, double base_lr, int64_t steps) -> std::shared_ptr<Schedule> {
      const int64_t warmup = p.integer("warmup");
      const auto decay_steps =
          static_cast<int64_t>(std::llround(p.real("decay_fraction") * static_cast<double>(steps)));
      const int64_t decay_start = steps - decay_steps;
      if (decay_start < warmup) {
        throw ParamError(
            "warmup", fmt::format("schedule.warmup = {} overlaps the decay, which starts at step "
                                  "{}: lower warmup or decay_fraction",
                                  warmup, decay_start));
      }
      return std::make_shared<WarmupStableDecay>(base_lr, p.real("min_lr_ratio"), warmup,
                                                 decay_start, steps);
    });

}  // namespace
}  // namespace kiln
