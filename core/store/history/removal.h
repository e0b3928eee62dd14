// `kiln runs rm` (and `kiln run --restart`): a run's rows, and its folder when nothing else
// needs it. Torch-free.
#pragma once

#include <functional>
#include <string>

#include "core/store/history/reader.h"
#include "core/store/runs/lookup.h"

namespace kiln {

// Deletes the run's row (its metrics, evals, snapshots and resumes rows cascade) and its folder
// when the folder's marker names the run and no other store (core/store/runs/paths.h, RunMarker);
// a folder the marker does not name as the run's (a run from before run markers, or a marker
// that names another run) is left, and one another store still lists is kept, and `warn` says
// so. A UserError, changing nothing, while a kiln process is training the run. Returns the
// folder it removed, or "".
std::string remove_run(HistoryDb& db, const RunRecord& run,
                       const std::function<void(const std::string&)>& warn);

}  // namespace kiln
