// One quantity at one point of each run: a `kiln runs compare --group-by ... --metric
// M@step=S` (or M@tokens=T) point, read off a run as --where reads it
// (core/store/history/selection.h: read_metric_point), with the reason when a run has none.
// Kept apart from core/app/presentation/seed_groups.cpp, which compares such values across groups
// of seeds, because saying why a run has no value at a point is a task of its own.
#pragma once

#include <string>
#include <vector>

#include "core/store/history/reader.h"
#include "core/store/history/selection.h"
#include "core/store/runs/lookup.h"

namespace kiln {

// "step 200" or "40960 tokens"; several points "step 10, 20, ..." (the first ten).
std::string point_text(const std::string& axis, const std::vector<double>& points);
// The point's step or token count.
double point_of(const MetricPoint& p);

// The metric's last value at or before the point. A UserError naming the run when it has not
// reached the point or has no value there.
double value_at(HistoryDb& db, const RunRecord& run, const MetricPoint& p);

}  // namespace kiln
