// `kiln run` and `kiln resume`: train an experiment, or go on with a run from its latest
// snapshot; `kiln run --launcher slurm` submits the run to Slurm instead (core/app/slurm/sweep.h).
// While either trains, SIGINT/SIGTERM stop it after the current step and a snapshot (exit code
// kExitInterrupted); a second signal stops it sooner, without that snapshot (one being written is
// dropped), and the run is still marked interrupted.
#pragma once

#include "tools/kiln/commands.h"

namespace kiln {

// Adds `kiln run` and `kiln resume` to `app`.
ChosenCommand add_run_commands(CLI::App& app);

}  // namespace kiln
