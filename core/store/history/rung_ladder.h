// An asha sweep's rung ladder as the run store has it: for each rung, the runs of the sweep with a
// value of the search's metric at the rung's step, best first, each with its state there. Read
// from the runs alone, with the ladder's shape its workers recorded
// (core/store/runs/sweep_claims.h). The search decides from it (core/app/sweeps/asha_search.h),
// and `kiln sweep status`, the end of `kiln sweep` and `kiln serve`'s ladder view draw it
// (core/app/presentation/sweep_ladder.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/store/runs/sweep_claims.h"

namespace kiln {

class HistoryDb;
struct RunRecord;

struct LadderEntry {
  int64_t run_id = 0;
  std::string name;
  double value = 0;  // its score at the rung: a cooldown probe's val loss where the member has
                     // one (core/store/runs/rung_probes.h), else the metric at the rung's step
                     // as logged (NaN: not finite)
  std::optional<double> uncooled;  // with a probe: the trajectory's own value there
  size_t place = 0;                // 1 = the best at this rung
  std::string state;  // promoted, "promoted (on its way)", paused (stopped once the sweep
                      // ended), failed; at the last rung the run's status
};

struct LadderRung {
  int64_t step = 0;
  size_t keep = 0;  // the best floor(n / reduction_factor) go on; 0 at the last rung
  std::vector<LadderEntry> entries;
};

// The run's scores at the rungs' steps it reached, in order, up to the first rung it has no value
// at (a run stopped before that rung's evaluation): at a rung below the last, its cooldown
// probe's val loss where it has one (an asha search with rung_cooldown), else its value of
// `shape.metric` there. With `shape.cooled`, a rung below the last without a probe has no value
// (the run was stopped before its probe scored: the rung is owed, and the run resumed to it
// takes the probe again). `uncooled`, when given, gets the metric's own values.
std::vector<double> rung_values(HistoryDb& db, const RunRecord& run, const LadderShape& shape,
                                std::vector<double>* uncooled = nullptr);

// The sweep's runs without those a rerun replaced: `kiln sweep --rerun-changed` trains a member
// whose config changed again as NAME:v2 (NAME:v3, ...), and the ladder and the member counts are
// the latest version's alone. In the order given.
std::vector<RunRecord> latest_versions(std::vector<RunRecord> runs);

// Every rung of `sweep`'s ladder. `ended`: the search is over, so paused members are stopped.
std::vector<LadderRung> read_sweep_ladder(HistoryDb& db, const std::string& sweep,
                                          const LadderShape& shape, bool ended);

// The `kiln runs list --sort` key that ranks runs as the ladder's last rung does: the metric at
// that rung's step (M@step=S, or -M@step=S for mode = "max"), not its best over the trajectory.
// `kiln sweep best` ranks an asha search's members by it.
std::string last_rung_sort_key(const LadderShape& shape);

}  // namespace kiln
