// `kiln bench`: time an experiment's training step, phase by phase (core/app/speed/measure.h).
#pragma once

#include "tools/kiln/commands.h"

namespace kiln {

// Adds `kiln bench` to `app`.
ChosenCommand add_bench_command(CLI::App& app);

}  // namespace kiln
