#include "core/app/presentation/seed_curves.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/app/presentation/seed_groups.h"
#include "core/util/error.h"
#include "core/util/statistics.h"

namespace kiln {

namespace {

Band band_of(const std::string& name) {
  if (name == "ci") return Band::kConfidence;
  if (name == "minmax") return Band::kMinMax;
  throw UserError(fmt::format("--band {} is not a band: use ci or minmax", name));
}

// Each run's value at each x it logged; the first row wins should an x repeat.
std::map<double, double> values_by_x(const Curve& curve) {
  std::map<double, double> at;
  for (size_t i = 0; i < curve.x.size() && i < curve.y.size(); ++i)
    at.emplace(curve.x[i], curve.y[i]);
  return at;
}

}  // namespace

GroupCurve combine_curves(const std::vector<Curve>& runs, Band band) {
  GroupCurve out;
  if (runs.empty()) return out;
  std::vector<std::map<double, double>> at;
  for (const auto& run : runs)
    at.push_back(values_by_x(run));
  for (const auto& first_run : at.front()) {
    const double x = first_run.first;
    std::vector<double> values;
    bool finite = true;
    for (const auto& run : at) {
      const auto it = run.find(x);
      if (it == run.end()) break;
      values.push_back(it->second);
      finite = finite && std::isfinite(it->second);
    }
    if (values.size() < runs.size()) continue;  // a run did not log this x
    double mean = NAN, low = NAN, high = NAN;
    if (finite) {
      const stats::Summary summary = stats::summarize(values, 0.95);
      mean = summary.mean;
      low = summary.ci_low;  // NaN for one run, as the min-max band below
      high = summary.ci_high;
      if (band == Band::kMinMax && values.size() >= 2) {
        const auto [lowest, highest] = std::minmax_element(values.begin(), values.end());
        low = *lowest;
        high = *highest;
      }
    }
    out.x.push_back(x);
    out.mean.push_back(mean);
    out.low.push_back(low);
    out.high.push_back(high);
  }
  return out;
}

std::vector<Series> group_series(HistoryDb& db, const std::vector<RunRecord>& runs,
                                 const CurveRequest& request) {
  const Band band = band_of(request.band);
  if (request.x == "time") {
    throw UserError(
        "--x time with --group-by: each run's step times differ, so no two runs share an x to "
        "average at: use --x step or --x tokens");
  }
  std::vector<Series> series;
  bool any_run_point = false, any_group_point = false;
  for (const auto& group : group_runs(runs, request.group_by)) {
    std::vector<Curve> curves;
    for (const auto& run : group.runs) {
      Curve curve = load_curve(db, run, request.metric, request.x);
      curve.y = moving_average(curve.y, request.smooth);  // each run smoothed before the mean
      any_run_point = any_run_point || any_finite(curve.y);
      curves.push_back(std::move(curve));
    }
    GroupCurve combined = combine_curves(curves, band);
    const size_t n = group.runs.size();
    const bool drawn = any_finite(combined.mean);
    any_group_point = any_group_point || drawn;
    // The count comes first: the legend cuts long names, and a long label must not hide it.
    Series s{
        fmt::format("{} run{}{}: {}", n, n == 1 ? "" : "s", drawn ? "" : ", no data", group.label),
        std::move(combined.x), std::move(combined.mean)};
    if (n >= 2) {
      s.band_low = std::move(combined.low);
      s.band_high = std::move(combined.high);
    }
    series.push_back(std::move(s));
  }
  if (any_run_point && !any_group_point) {
    throw UserError(fmt::format(
        "no group has a {0} value at a {1} that all its runs logged: plot the runs without "
        "--group-by, or group them by other keys",
        request.metric, request.x));
  }
  return series;
}

std::string group_caption(const CurveRequest& request) {
  return band_of(request.band) == Band::kConfidence ? ", mean of each group ± 95% CI"
                                                    : ", mean of each group, min to max";
}

}  // namespace kiln
