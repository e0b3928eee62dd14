#include "core/app/run/resume_checks.h"

#include <cmath>

#include <fmt/format.h>

#include "core/api/optimizer.h"
#include "core/config/options.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

std::string check_schedule_change(const ResolvedConfig& stored, const AssembledRun& run,
                                  int64_t from_step, ScheduleOnResume mode) {
  const TrainOptions planned = train_options(stored);
  if (planned.steps == run.train.steps) return "";
  const double base_lr = configured_lr(*run.optimizer);
  const double before = make_schedule(stored, planned, base_lr)->lr(from_step);
  const double after = run.schedule->lr(from_step);
  const double moved =
      before != 0 ? std::fabs(after - before) / std::fabs(before) : (after != 0 ? 1.0 : 0.0);
  if (mode == ScheduleOnResume::kRefuseJump && moved > 0.01) {
    throw UserError(fmt::format(
        "train.steps {} -> {} moves the lr of step {} from {:.4g} (as planned) to {:.4g} "
        "({:+.1f}%): pass --keep-schedule (the schedule keeps its {} steps; the added ones stay at "
        "its final lr) or --reschedule (the new total applies from step {} on)",
        planned.steps, run.train.steps, from_step + 1, before, after,
        100.0 * (after - before) / before, schedule_span(stored, planned), from_step + 1));
  }
  return fmt::format("lr of step {}: {:.4g} as planned over {} steps, {:.4g} now", from_step + 1,
                     before, schedule_span(stored, planned), after);
}

std::vector<RunInput> check_inputs(Connection& db, const RunRecord& record, ResolvedConfig& config,
                                   bool allow_change, std::vector<std::string>& changes) {
  const std::vector<RunInput> recorded = read_inputs(db, record.id);
  use_recorded_inputs(config, recorded);
  std::vector<RunInput> now = inputs_of(config);
  const std::vector<std::string> changed = changed_inputs(recorded, now);
  if (!changed.empty() && !allow_change) {
    throw UserError(fmt::format(
        "run '{}' would resume on other files than it trained on: {}: put the files back as "
        "they were, or pass --allow-data-change to go on with them as they are (the run's "
        "resumes record it)",
        record.name, join(changed, "; ")));
  }
  for (const auto& line : changed)
    changes.push_back("files changed: " + line);
  return now;
}

}  // namespace kiln
