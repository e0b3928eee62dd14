// `kiln sweep`: runs the members of a sweep (core/app/sweep_spec.h). Members run as child
// `kiln run` processes of this binary, `jobs` at a time, sharing the cores and the one run
// store; each one's output goes to its console.log. Re-running a sweep skips completed members
// and resumes the others. A Ctrl-C is passed on to the members once: each finishes its current
// step, snapshots and stops.
#pragma once

#include <functional>
#include <string>

#include "core/app/sweep_spec.h"

namespace kiln {

struct SweepOptions {
  int jobs = 1;
  std::string db;                   // empty = the base experiment's run.db
  std::string sort = "final_loss";  // a `kiln runs list` key; '-' prefix = descending
};

struct SweepOutcome {
  int incomplete = 0;        // members that did not complete
  bool interrupted = false;  // a SIGINT or SIGTERM stopped the sweep
};

// Runs (or resumes) the members not yet completed and prints a summary table.
SweepOutcome run_sweep(const SweepSpec& spec, const SweepOptions& options,
                       const std::function<void(const std::string&)>& print);

}  // namespace kiln
