// `kiln bench`: the training step of an experiment, measured. Tokens/s; ms per step split into
// data / forward / backward / communication / optimizer / logging; model FLOPs and MFU against
// a peak measured on this device with a large matmul; peak memory; and what the run store,
// console and snapshots would add. Nothing is recorded as a run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/config.h"

namespace kiln {

struct BenchOptions {
  int64_t steps = 20;
  int64_t warmup = 5;  // steps run first and not timed (allocator, caches, thread pools)
};

// Runs the benchmark and returns the printed report.
std::string run_bench(const ResolvedConfig& config, const BenchOptions& options);

}  // namespace kiln
