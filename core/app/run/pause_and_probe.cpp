#include "core/app/run/pause_and_probe.h"

#include <exception>

#include <fmt/format.h>

#include "core/store/runs/lookup.h"
#include "core/store/runs/writer.h"
#include "core/train/assemble.h"
#include "core/train/cooldown_probe.h"
#include "core/train/session.h"
#include "core/util/error.h"

namespace kiln {

void check_pause_step(int64_t step, int64_t start_step, int64_t total_steps) {
  if (step > start_step && step < total_steps) return;
  throw UserError(fmt::format(
      "--until {}: the run {}, and train.steps = {}: give a step between them (train.steps is "
      "the run's end: leave --until out to train to it)",
      step, start_step > 0 ? fmt::format("resumes after step {}", start_step) : "starts at 0",
      total_steps));
}

void check_probe(const AssembledRun& run, int64_t until, int64_t probe_steps) {
  if (probe_steps <= 0) return;
  if (until <= 0) {
    throw UserError(
        "--probe-cooldown branches the run where --until pauses it: give --until STEP too");
  }
  if (!run.val_data) {
    throw UserError(
        "--probe-cooldown scores the branch on the val split, and this run's data has none: set "
        "data.val");
  }
  cooldown_schedule(run.config, 1.0, until, probe_steps);
}

SessionOutcome train_then_probe(Session& session, int64_t probe_steps) {
  const SessionOutcome outcome = session.train();
  if (probe_steps > 0 && outcome.status == "paused") session.probe_cooldown(probe_steps);
  return outcome;
}

SessionOutcome probe_alone(Session& session, RunStore* store, const RunRecord& run, int64_t step,
                           int64_t probe_steps) {
  try {
    session.probe_cooldown(probe_steps);
  } catch (const std::exception& e) {
    if (store) store->finish_run(run.id, "failed", e.what());
    throw;
  }
  if (store) store->finish_run(run.id, "interrupted");
  return {run.id, run.name, "paused", step, 0};
}

}  // namespace kiln
