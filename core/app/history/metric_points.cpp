// The points of `kiln runs compare --metric` (core/app/history/metric_points.h): parsed, and read
// off a run's curves.
#include "core/app/history/metric_points.h"

#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "core/store/history/queries.h"
#include "core/util/error.h"

namespace kiln {

MetricPoint parse_point(const std::string& text) {
  const size_t at = text.find('@');
  const size_t eq = text.find('=', at == std::string::npos ? 0 : at);
  MetricPoint p{text, text.substr(0, at), "", 0};
  if (at != std::string::npos && eq != std::string::npos) {
    p.axis = text.substr(at + 1, eq - at - 1);
    const std::string number = text.substr(eq + 1);
    char* end = nullptr;
    p.at = std::strtoll(number.c_str(), &end, 10);
    const bool whole = !number.empty() && *end == '\0' && number[0] != '-' && number[0] != '+';
    if (!p.metric.empty() && (p.axis == "step" || p.axis == "tokens") && whole) return p;
  }
  throw UserError(
      fmt::format("--metric {}: expected METRIC@step=S or METRIC@tokens=T (a whole number), e.g. "
                  "val_loss@step=200",
                  text));
}

std::string point_text(const std::string& axis, const std::vector<double>& points) {
  std::string list;
  for (size_t i = 0; i < points.size() && i < 10; ++i)
    list += fmt::format("{}{:.0f}", i ? ", " : "", points[i]);
  if (points.size() > 10) list += ", ...";
  return axis == "step" ? "step " + list : list + " tokens";
}

bool is_evaluation(const std::string& metric) {
  return metric == "val_loss" || metric.find('.') != std::string::npos;
}

double value_at(HistoryDb& db, const RunRecord& run, const MetricPoint& p) {
  const Curve rows = load_curve(db, run, "loss", p.axis);  // every metrics row, on the axis
  const double at = static_cast<double>(p.at);
  if (rows.x.empty() || rows.x.back() < at) {
    throw UserError(fmt::format(
        "--metric {}: run '{}' has not reached {} ({}): leave the run out or pick an earlier "
        "point",
        p.text, run.name, point_text(p.axis, {at}),
        rows.x.empty() ? "it has no steps" : "it stops at " + point_text(p.axis, {rows.x.back()})));
  }
  const Curve curve = p.metric == "loss" ? rows : load_curve(db, run, p.metric, p.axis);
  std::optional<double> value;
  for (size_t i = 0; i < curve.x.size(); ++i) {
    if (is_evaluation(p.metric) ? curve.x[i] == at : curve.x[i] <= at) value = curve.y[i];
  }
  if (value) return *value;
  if (is_evaluation(p.metric)) {
    throw UserError(fmt::format("--metric {}: run '{}' has no {} eval at {}: {}", p.text, run.name,
                                p.metric, point_text(p.axis, {at}),
                                curve.x.empty()
                                    ? "it has no " + p.metric + " evals"
                                    : "its evals are at " + point_text(p.axis, curve.x)));
  }
  throw UserError(
      fmt::format("--metric {}: run '{}' has no row at or before {}: its first is at {}", p.text,
                  run.name, point_text(p.axis, {at}), point_text(p.axis, {rows.x.front()})));
}

}  // namespace kiln
