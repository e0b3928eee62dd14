// `kiln launch`: start a kiln command on N ranks, torchrun-style (core/distributed/launch.h).
#pragma once

#include "tools/kiln/commands.h"

namespace kiln {

// Adds `kiln launch` to `app`.
ChosenCommand add_launch_command(CLI::App& app);

}  // namespace kiln
