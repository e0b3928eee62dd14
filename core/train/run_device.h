// The settings of a run that belong to its process rather than to its parts: the device
// run.device gives this rank, and the CPU threads and seed. Apart from assemble.cpp, which applies
// them first, so that assembling the parts reads in one sitting.
#pragma once

#include <memory>
#include <string>

#include <torch/types.h>

#include "core/config/config.h"
#include "core/config/options.h"
#include "core/util/core_share.h"

namespace kiln {

// run.device: "cpu"; "cuda", this rank's GPU (cuda:LOCAL_RANK: the ranks on one machine take
// one GPU each); "cuda:N", GPU N for a single process; "auto", CUDA when this process sees a
// GPU, else the CPU, saying why in `note`.
torch::Device pick_device(const ResolvedConfig& config, const std::string& wanted,
                          std::string& note);

// The CPU threads a run is held to: run.threads, else OMP_NUM_THREADS (its first number, as
// OpenMP reads it; not under torchrun, which sets it to 1 itself: use run.threads there), else 0:
// the machine's usable CPUs divided among the run's ranks here. LibTorch splits its sums by
// thread (losses, norms, a LayerNorm's weight gradients), so only one count gives curves that
// match bit for bit: the count is taken once and recorded with the run.
int fixed_threads(const RunOptions& run);

// The CPU threads and seed of a run, applied before anything random happens. The process
// registers among the Kiln processes of this machine (core/util/core_share.h); without
// fixed_threads it starts with the usable CPUs divided among its local ranks, or, with
// run.share_cores, among every registered Kiln process too, and then the trainer rebalances
// through the returned share between steps.
std::shared_ptr<CoreShare> apply_runtime_settings(const RunOptions& run);

}  // namespace kiln
