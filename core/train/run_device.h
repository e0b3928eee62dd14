// The settings of a run that belong to its process rather than to its parts: the device
// run.device gives this rank, and the CPU threads and seed. Apart from assemble.cpp, which applies
// them first, so that assembling the parts reads in one sitting.
#pragma once

#include <string>

#include <torch/types.h>

#include "core/config/config.h"
#include "core/config/options.h"

namespace kiln {

// run.device: "cpu"; "cuda", this rank's GPU (cuda:LOCAL_RANK: the ranks on one machine take
// one GPU each); "cuda:N", GPU N for a single process; "auto", CUDA when this process sees a
// GPU, else the CPU, saying why in `note`.
torch::Device pick_device(const ResolvedConfig& config, const std::string& wanted,
                          std::string& note);

// The CPU threads and seed of a run, applied before anything random happens.
void apply_runtime_settings(const RunOptions& run);

}  // namespace kiln
