// `kiln bench`: the training step of an experiment, measured. Tokens/s; ms per step split into
// data / forward / backward / communication / optimizer / logging; model FLOPs and MFU, against
// the hardware's peak (core/kernels/cpu_peak.h) and against a large matmul measured on this device;
// peak memory; the BLAS and its kernels; and what the run store, console and snapshots would add.
// Nothing is recorded as a run; --record keeps the result for a later --against
// (core/app/speed/compare.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/store/runs/speed_records.h"

namespace kiln {

struct BenchOptions {
  int64_t steps = 20;
  int64_t warmup = 5;  // steps run first and not timed (allocator, caches, thread pools)
  std::optional<std::string> record;   // keep the result under this label (kDefaultBenchLabel)
  std::optional<std::string> against;  // compare with the result kept under this label
  bool allow_mismatch = false;         // compare with a result from another machine or config
};

struct BenchResult {
  BenchRecord record;    // the figures
  std::string report;    // what `kiln bench` prints
  std::string workload;  // core/train/precision_workload.h: what precision "auto" keeps it by
};

// Runs the benchmark. A label that --against does not find, or that --record finds taken, is
// refused before anything is timed.
BenchResult run_bench(const ResolvedConfig& config, const BenchOptions& options);

}  // namespace kiln
