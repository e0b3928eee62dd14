// Pictures of run history: `kiln runs plot` (one metric of several runs as an SVG) and
// `kiln report` (one self-contained HTML page: the runs table, differing config, loss curves).
#pragma once

#include <string>
#include <vector>

#include "core/store/history/queries.h"

namespace kiln {

struct CurveRequest {
  std::string metric = "loss";  // loss | val_loss | lr | grad_norm | tokens_per_sec
  std::string x = "step";       // step | tokens | time
  int smooth = 1;               // moving average over this many points
  bool log_y = false;
  // Empty: a line per run. Otherwise core/app/presentation/seed_groups.h's keys, and a line per
  // group: the mean of its runs with a band (ci | minmax) around it
  // (core/app/presentation/seed_curves.h).
  std::vector<std::string> group_by = {};  // `= {}`: {metric, x, smooth, log_y} stays warning-free
  std::string band = "ci";
};

// A UserError when the request is not valid or none of the runs has a point of the metric.
std::string plot_runs(HistoryDb& db, const std::vector<RunRecord>& runs,
                      const CurveRequest& request);

// No network and no scripts: inline CSS and inline SVG, so the file can be mailed or archived.
std::string render_report(HistoryDb& db, const std::vector<RunRecord>& runs,
                          const std::string& title);

}  // namespace kiln
