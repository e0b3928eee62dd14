// `kiln run` and `kiln resume`: a resolved config becomes an assembled run, a row in the run
// store, snapshots and a trained model (core/train/session.h does the training). The run row is
// created only after assembly succeeded, and is always closed: completed, failed (with the
// error) or interrupted. While one trains, its folder's lock (core/store/runs/paths.h) keeps a
// second kiln process off it. A stop signal ends the session after its current step and a
// snapshot: the caller holds the StopSignal (core/util/stop_signal.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/train/session_outcome.h"

namespace kiln {

// `restart`: a run of the same name is removed as `kiln runs rm` removes it (rows, and its folder
// when marked as its own) and a new run, with a new identity and folder, starts afresh;
// otherwise an existing name is refused (with a hint to resume an unfinished run). run.out_dir
// and run.db are stored absolute (core/store/runs/paths.h).
// `until` > 0: the run pauses after that step (Session::pause_after), refused before the run is
// created unless it lies below train.steps. `probe_cooldown` > 0 (with `until`): then the
// cooldown branch of that many steps is scored there (Session::probe_cooldown), refused up front
// when the run's schedule cannot be branched (core/train/cooldown_probe.h).
SessionOutcome run_experiment(ResolvedConfig config, bool restart, int64_t until = 0,
                              int64_t probe_cooldown = 0);

// How a resume that changes train.steps treats the learning-rate schedule, whose shape most
// plugins draw over train.steps (cosine, linear and wsd decay to their end at it).
enum class ScheduleOnResume {
  kRefuseJump,  // the default: refused when the lr at the resume step would move by over 1%
  kReschedule,  // --reschedule: the new total applies from the resume step on (the lr may jump)
  kKeep,        // --keep-schedule: the schedule keeps the steps it was planned with (its
                // schedule.total_steps); the steps added after them stay at its final lr
};

struct ResumeOptions {
  // The snapshot to continue from: "latest" (the latest intact one, or the best when the run
  // has only best ones), "best", or a step (core/checkpoint/snapshot_catalog.h).
  std::string checkpoint = "latest";
  ScheduleOnResume schedule = ScheduleOnResume::kRefuseJump;
  // Files the run reads that differ from the record of its start (core/store/runs/inputs.h):
  // refused (false), or accepted and recorded in the run's resumes (--allow-data-change).
  bool allow_data_change = false;
  // > 0: pause after this step (Session::pause_after), refused before the run is reopened
  // unless it lies between the snapshot's step and train.steps; or, with probe_cooldown, is the
  // snapshot's own step: a run stopped during its probe there takes the probe alone.
  int64_t until = 0;
  // > 0: at the pause, the cooldown branch of this many steps, as run_experiment's.
  int64_t probe_cooldown = 0;
};

// Continues a run, in the folder its row names, from its snapshot `options.checkpoint` of its
// own to its configured steps. `overrides` may change only keys that leave the model, data and
// optimisation unchanged (steps, eval and checkpoint frequency, threads, the parallel strategy);
// anything else is refused with the list of keys. A change of train.steps prints the lr at the
// resume step as planned and as it will be, and follows `options.schedule`. The data and
// other files the config names are read where the run's record of them says, from any
// directory, and checked against their fingerprints first.
SessionOutcome resume_run(const std::string& db, const std::string& name_or_id,
                          const std::vector<std::string>& overrides, const ResumeOptions& options);

}  // namespace kiln
