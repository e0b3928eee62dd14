// What `kiln bench` measured of bf16 against fp32 on this machine's class of CPU, which
// `precision.type = "auto"` reads: bf16 is chosen on a CPU only where it was measured faster.
// Whether it is faster depends on the CPU and not only on its features: Intel cores without AMX
// do as many FLOPs per cycle with bf16's dot-product instruction as with fp32's FMA, so bf16 GEMMs
// only add the rounding (docs/benchmarks.md), while AMX does many times more.
//
// Kept per user and machine, not per run store, since it describes the CPU: a JSON file at
// $XDG_CACHE_HOME/kiln/precision.json (~/.cache/kiln/precision.json), one entry per CPU class,
// the newest measurement replacing the one before. Torch-free.
#pragma once

#include <optional>
#include <string>

#include "core/util/cpu_features.h"

namespace kiln {

struct PrecisionVerdict {
  double fp32_tokens_per_sec = 0;
  double bf16_tokens_per_sec = 0;
  std::string experiment;   // what was timed
  int threads = 0;          // LibTorch's CPU threads while it was
  std::string measured_at;  // ISO-8601 UTC
  bool bf16_faster() const { return bf16_tokens_per_sec > fp32_tokens_per_sec; }
};

// The CPU's class: its name and the features that decide kernels and peaks,
// "Intel(R) Xeon(R) Processor | avx2 fma avx512f avx512_bf16".
std::string cpu_class(const CpuFeatures& cpu);

// The file, as above; "" when neither XDG_CACHE_HOME nor HOME is set.
std::string precision_verdicts_path();

// The verdict for `cpu_class`; nullopt when there is none (no file, or no entry). A file that
// is not what record_precision_verdict writes is a UserError naming it and how to fix it.
std::optional<PrecisionVerdict> find_precision_verdict(const std::string& cpu_class);

// Adds or replaces the verdict for `cpu_class`, keeping the other classes' (atomically: a
// reader sees the old file or the new one). A UserError when the file cannot be written.
void record_precision_verdict(const std::string& cpu_class, const PrecisionVerdict& verdict);

}  // namespace kiln
