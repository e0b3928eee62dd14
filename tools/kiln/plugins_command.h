// `kiln plugins`: every config section and every registered plugin, with their keys, types,
// defaults and meanings. The reference an experiment file is written against.
#pragma once

#include "tools/kiln/commands.h"

namespace kiln {

// Adds `kiln plugins` to `app`.
ChosenCommand add_plugins_command(CLI::App& app);

}  // namespace kiln
