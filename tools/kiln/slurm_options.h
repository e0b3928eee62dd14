// The Slurm options `kiln run` and `kiln sweep` take with --launcher slurm (core/app/slurm/sbatch.h
// SlurmOptions), declared once for both.
#pragma once

#include <CLI/CLI.hpp>

#include "core/app/slurm/sbatch.h"

namespace kiln {

// Adds them to `command` in one help group; `array`: also --max-parallel, a sweep's.
void add_slurm_options(CLI::App& command, SlurmOptions& slurm, bool array);
// Whether the command line gave any of them.
bool slurm_options_given(const CLI::App& command);

}  // namespace kiln
