// `kiln sweep best NAME --by KEY`: the sweep's completed member that KEY ranks first, as the
// experiment file that reproduces it, ready for `extends` or `kiln run`.
#pragma once

#include <string>
#include <vector>

#include "core/store/history/reader.h"

namespace kiln {

// The member's resolved config as TOML, run.name and run.sweep left out (a run made from it is
// a new run, not the member again), under comment lines naming the sweep, the member and its
// value. `by`: a `kiln runs list --sort` key (best_val, final_loss, last(val_loss),
// max(kjv_cloze.acc), ...); '-' first ranks the largest first. Members without a value of it
// are passed over, and so are the runs a `--rerun-changed` version replaced (NAME:vK, as the
// ladder reads them). `declared_task_metrics`: as ListQuery's. A UserError for a sweep with no
// member in the store, or none with a value, or a `by` that is no key ("--by 'KEY': ...").
std::string best_member_toml(HistoryDb& db, const std::string& sweep, const std::string& by,
                             const std::vector<std::string>& declared_task_metrics = {});

}  // namespace kiln
