// `kiln eval`, `kiln sample` and `kiln export`: the commands that read one snapshot of a run
// (core/app/run/from_snapshot.h). They share the run, --checkpoint and --db options.
#pragma once

#include "tools/kiln/commands.h"

namespace kiln {

// Adds `kiln eval`, `kiln sample` and `kiln export` to `app`.
ChosenCommand add_snapshot_commands(CLI::App& app);

}  // namespace kiln
