#include "core/kernels/cpu_runtime.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <fmt/format.h>

#include "core/kernels/kernel_cpuinfo.h"
#include "core/util/text.h"

namespace kiln {
namespace {

std::string first_match(const std::string& text, const std::regex& pattern) {
  std::smatch found;
  return std::regex_search(text, found, pattern) ? found[1].str() : "";
}

bool named_like(const std::string& path, const std::regex& pattern) {
  return std::regex_match(std::filesystem::path(path).filename().string(), pattern);
}

}  // namespace

TorchCpuLibraries parse_torch_config(const std::string& show_config) {
  TorchCpuLibraries found;
  found.torch_version = first_match(show_config, std::regex(R"(TORCH_VERSION=([0-9.]+))"));
  const std::string mkl =
      first_match(show_config, std::regex(R"(Math Kernel Library Version ([0-9.]+))"));
  const std::string blas = first_match(show_config, std::regex(R"(BLAS_INFO=(\w+))"));
  found.blas = !mkl.empty() ? "MKL " + mkl : blas;
  const std::string onednn = first_match(show_config, std::regex(R"(MKL-DNN v([0-9.]+))"));
  if (!onednn.empty()) found.onednn = "oneDNN " + onednn;
  return found;
}

LoadedRuntimes count_runtimes(const std::vector<std::string>& loaded,
                              const TorchCpuLibraries& libraries) {
  static const std::regex onednn_library(R"(lib(dnnl|mkldnn|onednn)[^/]*\.so.*)");
  static const std::regex openmp_library(R"(lib(gomp|iomp5|omp)(-[0-9a-f]+)?\.so.*)");
  LoadedRuntimes runtimes;
  if (!libraries.onednn.empty()) runtimes.onednn.push_back("built into LibTorch");
  for (const std::string& path : loaded) {
    if (named_like(path, onednn_library)) runtimes.onednn.push_back(path);
    if (named_like(path, openmp_library)) runtimes.openmp.push_back(path);
  }
  return runtimes;
}

std::vector<std::string> loaded_objects() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
          static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name);
        }
        return 0;
      },
      &paths);
  return paths;
}

std::string bf16_isa(const CpuFeatures& cpu, const std::string& cap) {
  // ONEDNN_MAX_CPU_ISA's names, widest first; oneDNN runs nothing above the cap.
  std::string capped = cap;
  std::transform(capped.begin(), capped.end(), capped.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  const bool amx_allowed = capped.empty() || capped == "all" ||
                           capped.find("amx") != std::string::npos ||
                           capped.find("avx10") != std::string::npos;
  const bool bf16_allowed = amx_allowed || capped.find("bf16") != std::string::npos;
  if (cpu.amx_bf16 && amx_allowed) return "AMX";
  if ((cpu.avx512_bf16 || cpu.amx_bf16) && bf16_allowed) return "AVX512-BF16";
  return "";
}

std::string cpu_runtime_line(const TorchCpuLibraries& libraries, const LoadedRuntimes& runtimes,
                             const CpuFeatures& cpu, const std::string& isa_cap, int threads,
                             const std::string& malloc) {
  const std::string isa = bf16_isa(cpu, isa_cap);
  const std::string onednn =
      libraries.onednn.empty()
          ? ""
          : fmt::format(" and {} (bf16, bf32; {})", libraries.onednn,
                        isa.empty() ? "bf16 emulated: LibTorch keeps such products" : "on " + isa);
  std::vector<std::string> openmp;
  for (const std::string& path : runtimes.openmp) {
    openmp.push_back(std::filesystem::path(path).filename().string());
  }
  return fmt::format(
      "CPU products: {} (fp32){}, built into LibTorch {}; OpenMP {}, {} thread{}; CPU: {}, {}; "
      "malloc: {}",
      libraries.blas.empty() ? "no BLAS" : libraries.blas, onednn, libraries.torch_version,
      openmp.empty() ? "none" : join(openmp, " + "), threads, threads == 1 ? "" : "s",
      cpu_display_name(cpu.model_name, cpu.kernel_model_name), feature_summary(cpu), malloc);
}

std::string malloc_name() {
  using Mallctl = int(const char*, void*, size_t*, void*, size_t);
  auto* mallctl = reinterpret_cast<Mallctl*>(dlsym(RTLD_DEFAULT, "mallctl"));
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (mallctl == nullptr || mallctl("version", &version, &size, nullptr, 0) != 0) {
    return "the C library's (each tensor over 32 MB mapped anew: docs/speed.md)";
  }
  return std::string("jemalloc ") + version;
}

std::string cpu_runtime_report() {
  const TorchCpuLibraries libraries = parse_torch_config(at::show_config());
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  return cpu_runtime_line(libraries, count_runtimes(loaded_objects(), libraries),
                          read_cpu_features(), cap == nullptr ? "" : cap, at::get_num_threads(),
                          malloc_name());
}

}  // namespace kiln
