// `kiln runs export RUN... --format tensorboard -o DIR`: each run's metrics, evals and config from
// the run store as one TensorBoard event file in DIR/<run name>/, with the tags that
// core/store/tensorboard/run_log.h lists: the records a training run with [metrics] tensorboard
// writes as it goes.
#pragma once

#include <string>
#include <vector>

#include "core/store/history/queries.h"

namespace kiln {

// Every check comes before the first file: a UserError, nothing written, when DIR cannot take
// event files (check_tensorboard_dir: the store, inside a run's snapshots folder, a file), when a
// run's name cannot be a folder under it, or when a run's folder there holds event files already
// (TensorBoard would show both files' points as one run). Each file is written whole, to a
// temporary beside it renamed into place. Wall times: the run's created_at plus its step times
// (dt_ms) so far. Returns the files written, in the order of `runs`.
std::vector<std::string> export_tensorboard(HistoryDb& db, const std::vector<RunRecord>& runs,
                                            const std::string& dir);

}  // namespace kiln
