// schedule "wsd": warmup-stable-decay (MiniCPM, DeepSeek). Linear warmup, the peak lr held,
// then for the last decay_fraction of the run a fall to min_lr_ratio x lr, linear, cosine or
// 1-sqrt (Hägele et al. 2024: 1 - sqrt(progress), which matched a cosine run's loss with a
// cooldown of 10-20% of the steps). Unlike a cosine, the stable phase does not depend on the run
// length, so a run can be extended, and a branch of it cooled down at any step scores what a run
// of that length would (kiln sweep's rung_cooldown).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/api/schedule.h"
#include "core/util/error.h"

namespace kiln {
namespace {

enum class DecayShape { kLinear, kCosine, kOneMinusSqrt };

class WarmupStableDecay : public Schedule {
 public:
  WarmupStableDecay(double lr, double min_ratio, int64_t warmup, int64_t decay_start, int64_t steps,
                    DecayShape shape)
      : lr_(lr),
        min_ratio_(min_ratio),
        warmup_(warmup),
        decay_start_(decay_start),
        steps_(steps),
        shape_(shape) {}

  double lr(int64_t step) const override {
    if (step < warmup_) return lr_ * warmup_factor(step, warmup_);
    if (step < decay_start_) return lr_;
    const double progress = std::min(
        1.0, static_cast<double>(step - decay_start_) / static_cast<double>(steps_ - decay_start_));
    // The share of the way from the peak down to min_lr_ratio x lr still left.
    const double left = shape_ == DecayShape::kLinear   ? 1.0 - progress
                        : shape_ == DecayShape::kCosine ? 0.5 * (1.0 + std::cos(M_PI * progress))
                                                        : 1.0 - std::sqrt(progress);
    return lr_ * (min_ratio_ + (1.0 - min_ratio_) * left);
  }

 private:
  double lr_, min_ratio_;
  int64_t warmup_, decay_start_, steps_;
  DecayShape shape_;
};

// Where the decay starts in a run of `steps` steps: its last decay_fraction. The one formula a
// run, its cooldown probes and a sweep's rung check (through ScheduleCooldowns) share.
int64_t decay_start_of(const Params& p, int64_t steps) {
  return steps -
         static_cast<int64_t>(std::llround(p.real("decay_fraction") * static_cast<double>(steps)));
}

std::shared_ptr<Schedule> make_wsd(const Params& p, double base_lr, int64_t decay_start,
                                   int64_t steps) {
  const int64_t warmup = p.integer("warmup");
  if (decay_start < warmup) {
    throw ParamError("warmup",
                     fmt::format("schedule.warmup = {} overlaps the decay, which starts at step "
                                 "{}: lower warmup or decay_fraction",
                                 warmup, decay_start));
  }
  const std::string shape = p.text("decay_shape");
  return std::make_shared<WarmupStableDecay>(base_lr, p.real("min_lr_ratio"), warmup, decay_start,
                                             steps,
                                             shape == "cosine"   ? DecayShape::kCosine
                                             : shape == "1-sqrt" ? DecayShape::kOneMinusSqrt
                                                                 : DecayShape::kLinear);
}

const bool registered =
    ScheduleRegistry::add(
        {"wsd",
         "warmup, stable at lr, then a decay (linear, cosine or 1-sqrt) over the last "
         "decay_fraction of the steps",
         {ParamSpec::integer("warmup", 0, "steps of linear warmup from lr/warmup to lr")
              .at_least(0),
          ParamSpec::real("decay_fraction", 0.2, "share of train.steps spent decaying")
              .at_least(0)
              .at_most(1),
          ParamSpec::real("min_lr_ratio", 0.0, "final lr as a fraction of the peak")
              .at_least(0)
              .at_most(1),
          ParamSpec::text("decay_shape", "linear",
                          "the fall from the peak: linear, cosine or 1-sqrt (1 - sqrt(progress))")
              .one_of({"linear", "cosine", "1-sqrt"})
              .added_later()}},
        [](const Params& p, double base_lr, int64_t steps) {
          return make_wsd(p, base_lr, decay_start_of(p, steps), steps);
        }) &&
    // A branch from step S decays over its N steps as a run of S + N steps would: from S.
    ScheduleCooldowns::add("wsd",
                           {decay_start_of,
                            [](const Params& p, double base_lr, int64_t from_step, int64_t steps) {
                              return make_wsd(p, base_lr, from_step, from_step + steps);
                            },
                            "lower schedule.decay_fraction"});

}  // namespace
}  // namespace kiln
