#include "core/train/cooldown_probe.h"

#include <fmt/format.h>

#include "core/config/options.h"
#include "core/util/error.h"

namespace kiln {

std::shared_ptr<Schedule> cooldown_schedule(const ResolvedConfig& config, double base_lr,
                                            int64_t from_step, int64_t steps) {
  const std::string& type = config.type("schedule");
  const ScheduleCooldown* cooldown = ScheduleCooldowns::find(type);
  if (!cooldown) {
    throw UserError(fmt::format(
        "a cooldown probe branches a {} schedule's stable phase, and this run's schedule is "
        "'{}': set schedule.type = {}",
        ScheduleCooldowns::names_text(false), type, ScheduleCooldowns::names_text(true)));
  }
  const Params& params = config.params("schedule");
  const int64_t trunk_decay_start = cooldown->decay_start(params, train_options(config).steps);
  if (from_step > trunk_decay_start) {
    throw UserError(fmt::format(
        "a cooldown probe at step {} would start a decay where the run's own began at step {}: "
        "{}, or probe earlier",
        from_step, trunk_decay_start, cooldown->later_decay));
  }
  return cooldown->cooled(params, base_lr, from_step, steps);
}

}  // namespace kiln
