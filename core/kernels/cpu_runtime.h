// What runs LibTorch's CPU products in this process, for the line a run's header and `kiln bench`
// print. PyPI's torch wheel carries its own: Intel's MKL for fp32 GEMMs and oneDNN for bf16 ones
// (and for fp32 ones under precision bf32, which rounds their operands to bf16), on AMX's tiles
// where the CPU has them, each built into libtorch_cpu, on the wheel's libgomp's threads. Kiln's
// own CPU kernels run on that same libgomp (CMakeLists.txt). A second copy of oneDNN or of an
// OpenMP runtime in the process (a system library linked beside the wheel) would bring its own
// threads and kernel choices: loaded_runtimes() lists what is loaded so that a test can refuse it.
#pragma once

#include <string>
#include <vector>

#include "core/kernels/cpu_features.h"

namespace kiln {

// The libraries LibTorch was built with, as its build configuration (at::show_config()) names
// them: "MKL 2024.2", "oneDNN 3.13.3"; "" for one it was built without.
struct TorchCpuLibraries {
  std::string torch_version;  // "2.15.0"
  std::string blas;
  std::string onednn;
};
TorchCpuLibraries parse_torch_config(const std::string& show_config);

// The copies of oneDNN and the OpenMP runtimes in a process: `loaded` the paths of its shared
// objects, `libraries` what LibTorch has built in (a built-in oneDNN is one copy; a libdnnl.so,
// libmkldnn.so or libonednn.so loaded beside it another). OpenMP runtimes: libgomp (an older
// wheel's renamed libgomp-<hash> too, but not libgomp's offloading plugins), libiomp5, libomp, by
// file name.
struct LoadedRuntimes {
  std::vector<std::string> onednn;  // "built into LibTorch", or a library's path
  std::vector<std::string> openmp;  // each runtime's path
};
LoadedRuntimes count_runtimes(const std::vector<std::string>& loaded,
                              const TorchCpuLibraries& libraries);

// This process's shared objects, by path (dl_iterate_phdr).
std::vector<std::string> loaded_objects();

// The ISA oneDNN's bf16 products run on here: "AMX" where the CPU has AMX-BF16 tiles, "AVX512-BF16"
// where it has only those instructions, "" where oneDNN emulates bf16 (and LibTorch does not send
// it bf16 products). Lowered, as oneDNN lowers it, when ONEDNN_MAX_CPU_ISA (`cap`) caps it.
std::string bf16_isa(const CpuFeatures& cpu, const std::string& cap);

// The line: "CPU products: MKL 2024.2 (fp32) and oneDNN 3.13.3 (bf16, bf32; on AMX), built into
// LibTorch 2.15.0; OpenMP libgomp.so.1, 2 threads; CPU: Intel Xeon, avx2 fma avx512f avx512_bf16
// amx_tile amx_bf16; malloc: jemalloc 5.3.0". `threads`: LibTorch's intra-op threads.
std::string cpu_runtime_line(const TorchCpuLibraries& libraries, const LoadedRuntimes& runtimes,
                             const CpuFeatures& cpu, const std::string& isa_cap, int threads,
                             const std::string& malloc);

// The malloc this process runs: "jemalloc 5.3.0-0-g54eaed1d8b56" (linked into kiln, which keeps
// freed memory for reuse while it trains: core/util/freed_memory.h), or the C library's.
std::string malloc_name();

// cpu_runtime_line for this process.
std::string cpu_runtime_report();

}  // namespace kiln
