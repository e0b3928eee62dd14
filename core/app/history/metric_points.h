// One quantity at one point of each run: a `kiln runs compare --group-by ... --metric
// M@step=S` (or M@tokens=T) point, parsed and read off a run's curves. Kept apart from
// core/app/history/seed_groups.cpp, which compares such values across groups of seeds, because
// reading a value at a point (and saying why a run has none) is a task of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/store/history/reader.h"
#include "core/store/runs/lookup.h"

namespace kiln {

// One --metric: "val_loss@step=200" or "lr@tokens=40960".
struct MetricPoint {
  std::string text, metric, axis;
  int64_t at = 0;
};

// "M@step=S" or "M@tokens=T", S and T whole numbers; a UserError otherwise.
MetricPoint parse_point(const std::string& text);

// "step 200" or "40960 tokens"; several points "step 10, 20, ..." (the first ten).
std::string point_text(const std::string& axis, const std::vector<double>& points);

// val_loss and a task's TASK.METRIC are evaluations, taken at some steps only.
bool is_evaluation(const std::string& metric);

// The metric's last value at or before the point; an evaluation's at exactly that point (an
// eval is not carried forward: each one is a measurement of the weights at its own step). A
// UserError when the run has not reached the point or has no value there.
double value_at(HistoryDb& db, const RunRecord& run, const MetricPoint& p);

}  // namespace kiln
