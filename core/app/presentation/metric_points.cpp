// The points of `kiln runs compare --metric` (core/app/presentation/metric_points.h): read off a
// run, and why a run has none.
#include "core/app/presentation/metric_points.h"

#include <variant>

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

std::string point_text(const std::string& axis, const std::vector<double>& points) {
  std::string list;
  for (size_t i = 0; i < points.size() && i < 10; ++i)
    list += fmt::format("{}{:.0f}", i ? ", " : "", points[i]);
  if (points.size() > 10) list += ", ...";
  return axis == "step" ? "step " + list : list + " tokens";
}

double point_of(const MetricPoint& p) {
  return std::holds_alternative<int64_t>(p.key.at)
             ? static_cast<double>(std::get<int64_t>(p.key.at))
             : std::get<double>(p.key.at);
}

double value_at(HistoryDb& db, const RunRecord& run, const MetricPoint& p) {
  const PointReading reading = read_metric_point(db, run.id, p);
  if (reading.value) return *reading.value;
  const std::string axis = p.key.at_tokens ? "tokens" : "step";
  const double at = point_of(p);
  if (reading.reached < at) {
    throw UserError(fmt::format(
        "--metric {}: run '{}' has not reached {} (it stops at {}): leave the run out or pick an "
        "earlier point",
        p.text, run.name, point_text(axis, {at}), point_text(axis, {reading.reached})));
  }
  const char* rows = p.evaluation ? "evals" : "rows";
  std::vector<double> steps(reading.steps.begin(), reading.steps.end());
  throw UserError(fmt::format("--metric {}: run '{}' has no {} value at or before {}: {}", p.text,
                              run.name, p.key.name, point_text(axis, {at}),
                              steps.empty() ? fmt::format("it has no {} {}", p.key.name, rows)
                                            : fmt::format("its {} {} are at {}", p.key.name, rows,
                                                          point_text("step", steps))));
}

}  // namespace kiln
