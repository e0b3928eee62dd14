// What `kiln bench` measured of bf16 against fp32 on this machine's class of CPU, which
// `precision.type = "auto"` reads: bf16 is chosen on a CPU only where it was measured faster.
// Whether it is faster depends on the CPU and not only on its features: Intel cores without AMX
// do as many FLOPs per cycle with bf16's dot-product instruction as with fp32's FMA, so bf16 GEMMs
// only add the rounding (docs/benchmarks.md), while AMX does many times more.
//
// Whether bf16 pays also depends on the model's shapes (a tiny model measured at 0.83x where a
// wide one gave 2.88x on one CPU): a verdict is kept per CPU class and workload (the matrix
// products each rank computes: core/train/precision_workload.h), and a run uses only the verdict
// of its own. Kept per user and machine, not per run store, since it describes the CPU: a JSON file
// at $XDG_CACHE_HOME/kiln/precision.json (~/.cache/kiln/precision.json), one entry per key, the
// newest measurement replacing the one before. Torch-free.
#pragma once

#include <optional>
#include <string>

#include "core/kernels/cpu_features.h"

namespace kiln {

struct PrecisionVerdict {
  double fp32_tokens_per_sec = 0;
  double bf16_tokens_per_sec = 0;
  std::string experiment;   // what was timed: the file and its --set overrides
  int threads = 0;          // LibTorch's CPU threads while it was
  std::string measured_at;  // ISO-8601 UTC
  bool bf16_faster() const { return bf16_tokens_per_sec > fp32_tokens_per_sec; }
};

// The CPU's class: its name and the features that decide kernels and peaks,
// "Intel(R) Xeon(R) Processor | avx2 fma avx512f avx512_bf16".
std::string cpu_class(const CpuFeatures& cpu);

// The file, as above; "" when neither XDG_CACHE_HOME nor HOME is set.
std::string precision_verdicts_path();

// A verdict's key: the CPU class and the workload (core/train/precision_workload.h).
std::string precision_verdict_key(const std::string& cpu_class, const std::string& workload);

// The verdict for `key`; nullopt when there is none (no file, no entry, or a file of an older
// format, whose keys are not today's). A file that is not what record_precision_verdict writes
// is a UserError naming it and how to fix it.
std::optional<PrecisionVerdict> find_precision_verdict(const std::string& key);
// "PATH holds none Kiln reads (format 2 keyed a workload by its thread count)" for a file of an
// older format; "" otherwise.
std::string outdated_precision_verdicts();

// Adds or replaces the verdict for `key`, keeping the others (atomically: a reader sees the old
// file or the new one). A UserError when the file cannot be written.
void record_precision_verdict(const std::string& key, const PrecisionVerdict& verdict);

}  // namespace kiln
