// `kiln runs` and `kiln report`: the run store read back (list, show, compare, diff, export,
// plot, import, rm) and one HTML page about runs or sweeps (core/app/presentation/).
#pragma once

#include "tools/kiln/commands.h"

namespace kiln {

// Adds `kiln runs` with its subcommands, and `kiln report`, to `app`.
ChosenCommand add_runs_commands(CLI::App& app);

}  // namespace kiln
