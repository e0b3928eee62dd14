// Runs grouped by their resolved config, so that seeds of one config are read as one sample:
// `kiln runs compare --group-by`, the table at the end of a sweep with seeds, and
// `kiln runs plot --group-by`.
#pragma once

#include <string>
#include <vector>

#include "core/store/history/reader.h"
#include "core/store/runs/lookup.h"

namespace kiln {

// Runs grouped by resolved config: `keys` = the config keys whose values define a group, or
// {"auto"} = every resolved config key except run.seed and the naming/placement keys (run.name,
// run.sweep, run.out_dir, run.db, and other unhashed keys).
struct RunGroup {
  std::string label;            // "optimizer.lr=0.001 model.n_layer=2" (the keys that differ
                                // between groups), or the one config's name when there is one
                                // group
  std::vector<RunRecord> runs;  // in the order given
};
std::vector<RunGroup> group_runs(const std::vector<RunRecord>& runs,
                                 const std::vector<std::string>& keys);

// What `kiln runs compare --group-by` reports besides the grouping.
struct GroupReportOptions {
  // A group's label, or `key=value` terms (space-separated) that pick one group; "" = the first.
  std::string baseline;
  // "M@step=S" or "M@tokens=T", M a `kiln runs plot` metric: the last value at or before the
  // point, or for val_loss the eval at that step; a run that has not reached it is a UserError.
  std::vector<std::string> metrics;
};

// Per group and quantity (final loss, best validation loss, each metric point): seeds, mean,
// standard deviation and 95% Student-t interval; against the baseline group the difference,
// Welch's p-value and the seeds per group that difference would need for p < 0.05 at 80% power.
std::string grouped_report(HistoryDb& db, const std::vector<RunGroup>& groups,
                           const GroupReportOptions& options);

// Whether some group holds more than one run: seeds to summarise.
bool has_seeds(const std::vector<RunGroup>& groups);

}  // namespace kiln
