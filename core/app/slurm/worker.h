// `kiln sweep work NAME --db DB`: what each array task of a search submitted with --launcher slurm
// runs (an asha sweep: core/app/slurm/sweep.h submits one task per worker, not per member). It
// reads the sweep file the submission recorded and works on the search as one of its workers
// (core/app/sweeps/asha_search.h): it claims a job in the run store, runs it, and asks again,
// until no job is left and no other worker runs one that could bring a promotion. Workers share
// nothing but the store, so any of them may be killed, or all, and `kiln sweep resubmit` (or the
// local `kiln sweep FILE`) goes on with the same search.
#pragma once

#include <functional>
#include <string>

namespace kiln {

// The exit code: 0 when the search is over with every member completed or stopped at a rung,
// kExitInterrupted when a signal stopped this worker, kExitSomeFailed when a member failed.
int run_sweep_worker(const std::string& db, const std::string& name,
                     const std::function<void(const std::string&)>& print);

}  // namespace kiln
