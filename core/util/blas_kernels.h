// Which BLAS LibTorch's CPU matmuls run on, which kernels it chose, and whether the CPU runs
// better ones. Debian's OpenBLAS (built with DYNAMIC_ARCH) chooses its kernels by CPU model when
// it loads; a model it does not know, common in clouds where the hypervisor hides it, gets the
// SSE3 kernels of 2004's Prescott: 586 against 223 ms per step of the default experiment with
// SkylakeX's on an AVX-512 Xeon. Its only switch is OPENBLAS_CORETYPE, read when the
// library initialises, that is when the process loads it: so kiln sets it and executes itself
// again, once (tools/kiln/main.cpp). The BLAS is found with dlsym, so a LibTorch on another BLAS
// (MKL in PyTorch's wheels) builds and runs as before. Torch-free.
#pragma once

#include <optional>
#include <string>

#include "core/util/cpu_features.h"

namespace kiln {

struct BlasInfo {
  bool openblas = false;      // false: another BLAS, whose kernels Kiln cannot see
  std::string version;        // "0.3.21"
  std::string kernels;        // openblas_get_corename(): "Prescott", "Haswell", "SkylakeX", ...
  bool dynamic_arch = false;  // every kernel set built in, one chosen at load: the variable works
  int threads = 0;
};

// The BLAS this process has loaded.
BlasInfo query_blas();

// OpenBLAS's kernel set for the CPU's widest instruction set (SkylakeX for AVX-512, Haswell for
// AVX2 with FMA, Sandybridge for AVX) when `current` uses a narrower one; nullopt when it
// matches, or `current` is a name this table does not rank (a newer OpenBLAS's).
std::optional<std::string> matching_coretype(const CpuFeatures& cpu, const std::string& current);

// What kiln sets OPENBLAS_CORETYPE to before executing itself again: matching_coretype, for an
// OpenBLAS built with DYNAMIC_ARCH, unless `user_value` (OPENBLAS_CORETYPE as kiln found it) is
// set: the user's choice is never overridden.
std::optional<std::string> better_coretype(const CpuFeatures& cpu, const BlasInfo& blas,
                                           const char* user_value);

// At start-up, before any BLAS call: when better_coretype says so, sets OPENBLAS_CORETYPE (and a
// marker) in this process's environment, so that every kiln it starts loads OpenBLAS with those
// kernels and never executes itself again. This process loaded OpenBLAS before: only
// restart_with_better_blas_kernels gives it the kernels. Keeps `argv` for that.
void choose_better_blas_kernels(char** argv);

// For a command that computes, after its arguments are checked and before it writes anything:
// executes this binary again with the environment choose_better_blas_kernels set, when it set
// one. Commands that only read, report or start other kiln processes skip it, and with it the
// second load of LibTorch (about a second where OpenBLAS misjudged the CPU). Returns when it did
// not execute (nothing to fix, or exec failed: blas_report then warns).
void restart_with_better_blas_kernels();

// The BLAS line: "BLAS: OpenBLAS 0.3.21 (kernels SkylakeX, 2 threads; CPU: AMD EPYC, avx2 fma
// avx512f avx512_bf16)". `switched_from`: what OpenBLAS chose before kiln set the variable.
std::string blas_line(const CpuFeatures& cpu, const BlasInfo& blas, const char* switched_from);

// One "warning: ..." line with the command that fixes it, when the kernels running are narrower
// than the CPU's and kiln did not fix it; nullopt otherwise. `user_value` and `switched_from`
// as above.
std::optional<std::string> blas_warning(const CpuFeatures& cpu, const BlasInfo& blas,
                                        const char* user_value, const char* switched_from);

// blas_line and blas_warning for this process: what a run's header and `kiln bench` print.
struct BlasReport {
  std::string line;
  std::optional<std::string> warning;
  std::string text() const;  // the line, and the warning on a second one
};
// The BLAS line (with oneDNN's part, below, and the malloc's) and its warning for this process.
BlasReport blas_report();

// The malloc this process runs: "jemalloc 5.3.0-0-g54eaed1d8b56" (linked into kiln, which keeps
// freed memory for reuse: tools/kiln/allocator.cpp), or the C library's.
std::string malloc_name();

// "oneDNN 2.6.3" when oneDNN's dnnl_sgemm is in this process (Debian's LibTorch loads it), which
// Kiln's linear layers then call (core/api/onednn_linear.h); "" otherwise.
std::string onednn_version();
// Whether that oneDNN has dnnl_gemm_bf16bf16f32, which the linear layers call under precision
// "bf16" (bfloat16 operands, fp32 sums).
bool onednn_has_bf16_gemm();

}  // namespace kiln
