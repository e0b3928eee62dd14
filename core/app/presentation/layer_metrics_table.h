// `kiln runs show`'s table of a run's layer measures (core/store/runs/layer_metrics.h), such as a
// mixture of experts' router losses and load: each one's steps, last value, mean and largest.
#pragma once

#include <cstdint>

#include "core/store/history/queries.h"
#include "core/util/table.h"

namespace kiln {

// One row per measure, by name; none for a run without any.
Table layer_metrics_table(HistoryDb& db, int64_t run_id);

}  // namespace kiln
