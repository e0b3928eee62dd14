// `kiln sweep`: a grid of experiments from a sweep file, or from an experiment file with
// --grid/--zip axes; --dry-run checks and lists the members without running them. Exit code
// kExitInterrupted when a SIGINT or SIGTERM stopped it, kExitSomeFailed when a member did not
// complete otherwise. With --launcher slurm the sweep is submitted as a Slurm job array and the
// command exits (core/app/slurm/sweep.h); `kiln sweep status|cancel|resubmit NAME` follow it,
// and `kiln sweep task` is what each array task runs (core/app/slurm/task.h).
#pragma once

#include "tools/kiln/commands.h"

namespace kiln {

// Adds `kiln sweep` with its subcommands to `app`.
ChosenCommand add_sweep_command(CLI::App& app);

}  // namespace kiln
