// `kiln run` and `kiln resume`: a resolved config becomes an assembled run, a row in the run
// store, snapshots and a trained model (core/train/session.h does the training). The run row is
// created only after assembly succeeded, and is always closed: completed, failed (with the
// error) or interrupted. While one trains, its folder's lock (core/store/run_paths.h) keeps a
// second kiln process off it. A stop signal ends the session after its current step and a
// snapshot: the caller holds the StopSignal (core/util/stop_signal.h).
#pragma once

#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/train/session_outcome.h"

namespace kiln {

// `restart`: a run of the same name is removed as `kiln runs rm` removes it (rows, and its folder
// when marked as its own) and a new run, with a new identity and folder, starts afresh;
// otherwise an existing name is refused (with a hint to resume an unfinished run). run.out_dir
// and run.db are stored absolute (core/store/run_paths.h).
SessionOutcome run_experiment(ResolvedConfig config, bool restart);

// Continues a run, in the folder its row names, from its latest intact snapshot of its own
// (core/checkpoint/snapshot_catalog.h) to its configured steps. `overrides` may
// change only keys that leave the model, data and optimisation unchanged (steps, eval and
// checkpoint frequency, threads, the parallel strategy); anything else is refused with the list
// of keys.
SessionOutcome resume_run(const std::string& db, const std::string& name_or_id,
                          const std::vector<std::string>& overrides);

}  // namespace kiln
