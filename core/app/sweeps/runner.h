// `kiln sweep`: runs the members of a sweep (core/app/sweeps/spec.h), once every one of them was
// assembled without training (core/app/sweeps/check.h): a member that would fail at assembly stops
// the sweep before any starts, with nothing written to the run store. Members run as child
// `kiln run` processes of this binary, `jobs` at a time, sharing the cores and the one run
// store; each one's output goes to its console.log. Re-running a sweep skips completed members
// and resumes the others. A Ctrl-C is passed on to the members once: each finishes its current
// step, snapshots and stops.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/app/sweeps/spec.h"
#include "core/store/runs/sweep_claims.h"

namespace kiln {

struct SweepOptions {
  int jobs = 1;
  int threads = 0;                  // run.threads of the members; 0: the cores / jobs (jobs > 1)
  std::string db;                   // empty = the base experiment's run.db
  std::string sort = "final_loss";  // a `kiln runs list` key; '-' prefix = descending
  bool dry_run = false;             // print the checked members and stop: no run, no run store
  // A member whose run in the store has another config (the sweep file was edited): refused
  // (kRefuse) with the keys that changed, trained again as a new run named MEMBER:v2 (or the
  // next free version: --rerun-changed), or left as it ran (--keep-old).
  enum class Changed { kRefuse, kRerun, kKeepOld } changed = Changed::kRefuse;
};

struct SweepOutcome {
  int incomplete = 0;        // members that did not complete
  bool interrupted = false;  // a SIGINT or SIGTERM stopped the sweep
  // What the report of its end reads (core/app/presentation/sweep_summary.h): the run store the
  // members ran in (empty: a dry run, nothing ran), and an asha search's ladder.
  std::string db;
  std::optional<LadderShape> ladder;
};

// Checks every member, then runs (or resumes) those not yet completed; the caller prints the
// report of its end. With dry_run, prints the members table instead of running them.
SweepOutcome run_sweep(const SweepSpec& spec, const SweepOptions& options,
                       const std::function<void(const std::string&)>& print);

}  // namespace kiln
