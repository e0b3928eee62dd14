#include "core/train/cooldown_probe.h"

#include <cmath>

#include <fmt/format.h>

#include "core/config/options.h"
#include "core/util/error.h"

namespace kiln {

std::shared_ptr<Schedule> cooldown_schedule(const ResolvedConfig& config, double base_lr,
                                            int64_t from_step, int64_t steps) {
  if (config.type("schedule") != "wsd") {
    throw UserError(fmt::format(
        "a cooldown probe branches a wsd schedule's stable phase, and this run's schedule is "
        "'{}': set schedule.type = \"wsd\"",
        config.type("schedule")));
  }
  Params params = config.params("schedule");
  const int64_t trunk_steps = train_options(config).steps;
  const int64_t trunk_decay_start =
      trunk_steps - std::llround(params.real("decay_fraction") * static_cast<double>(trunk_steps));
  if (from_step > trunk_decay_start) {
    throw UserError(fmt::format(
        "a cooldown probe at step {} would start a decay where the run's own began at step {}: "
        "lower schedule.decay_fraction, or probe earlier",
        from_step, trunk_decay_start));
  }
  const int64_t total = from_step + steps;
  params.set("decay_fraction", static_cast<double>(steps) / static_cast<double>(total));
  return ScheduleRegistry::create("wsd", params, base_lr, total);
}

}  // namespace kiln
