// `kiln runs plot --group-by`: the runs of one config (seeds, reruns) read as one sample, drawn as
// the mean of their curves with a band around it, so that a difference between configs can be
// told from the spread between seeds.
#pragma once

#include <string>
#include <vector>

#include "core/app/presentation/plot_svg.h"
#include "core/app/presentation/report.h"
#include "core/store/history/queries.h"

namespace kiln {

enum class Band {
  kConfidence,  // the 95% Student-t confidence interval of the mean across the runs
  kMinMax,      // the lowest and the highest of the runs' values
};

// Runs of one config normally log the same x values; where they do not, the group's curve has a
// point only at an x that every run logged (so it ends where the shortest run ends), and a gap
// where a run's value there is not finite. `low` and `high` are NaN for a group of one run.
struct GroupCurve {
  std::vector<double> x, mean, low, high;
};
GroupCurve combine_curves(const std::vector<Curve>& runs, Band band);

// One series per group of `runs` (request.group_by): the mean of its runs' curves, each smoothed
// first, with the band of request.band for a group of two runs or more; the legend names the
// group and its number of runs. A UserError for --x time, which has no x common to two runs.
std::vector<Series> group_series(HistoryDb& db, const std::vector<RunRecord>& runs,
                                 const CurveRequest& request);

// What the band of a grouped plot shows, for its title: ", mean of each group ± 95% CI".
std::string group_caption(const CurveRequest& request);

}  // namespace kiln
