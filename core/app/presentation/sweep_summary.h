// What `kiln sweep` prints once its members ran, and what `kiln sweep status` prints: the members
// side by side, an asha search's ladder (core/app/presentation/sweep_ladder.h), and seeds of one
// config read as one sample (core/app/presentation/seed_groups.h). Read from the run store alone;
// the sweep itself runs in core/app/sweeps/runner.h.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/store/history/reader.h"
#include "core/store/runs/sweep_claims.h"

namespace kiln {

// The members of sweep `name` (one run here, not submitted to a scheduler) in the store at `db`:
// a line of counts by status, then the members side by side. A UserError when it has none.
std::string members_status(const std::string& db, const std::string& name);

// The end of `kiln sweep`: with `ladder` (an asha search), its ladder and what it cost
// (`ended`: the search is over, so paused members are stopped); then the sweep's runs side by
// side, sorted by `sort` (a `kiln runs list` key, with the search's `declared_task_metrics`), and
// with seeds each config's completed runs as one sample. Printed a part at a time.
struct SweepReport {
  std::string db, sweep, sort;
  std::vector<std::string> declared_task_metrics;
  std::optional<LadderShape> ladder;
  bool ended = true;
};
void print_sweep_report(const SweepReport& report,
                        const std::function<void(const std::string&)>& print);

// `kiln sweep status` of an asha sweep: its ladder as the store says now (not ended), then the
// members `running`, each with its worker and the step it runs to.
std::string search_status(const std::string& db, const std::string& sweep, const LadderShape& shape,
                          const std::vector<SweepDecision>& running);

}  // namespace kiln
