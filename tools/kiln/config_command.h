// `kiln config EXP.toml [--set section.key=value]...`: the config a run of EXP.toml would get,
// resolved (its bases, its own keys, the --sets, every default), each key with where its value
// came from, and the files read with their SHA-256. Starts nothing and writes nothing.
#pragma once

#include "tools/kiln/commands.h"

namespace kiln {

// Adds `kiln config` to `app`.
ChosenCommand add_config_command(CLI::App& app);

}  // namespace kiln
