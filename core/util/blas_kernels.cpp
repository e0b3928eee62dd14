#include "core/util/blas_kernels.h"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/util/kernel_cpuinfo.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// Set beside OPENBLAS_CORETYPE when kiln sets it, to the kernels OpenBLAS had chosen: the
// executed-again process (and every kiln it starts) knows the value is kiln's, not the user's,
// and never executes itself again.
constexpr const char* kSwitchedFromVariable = "KILN_OPENBLAS_SWITCHED_FROM";
constexpr const char* kCoretypeVariable = "OPENBLAS_CORETYPE";

// This process's arguments, kept by choose_better_blas_kernels when it set the variables: the
// process still runs the kernels OpenBLAS chose and executes itself again before it computes.
char** restart_argv = nullptr;

// OpenBLAS's x86 kernel sets (driver/others/dynamic.c), by the widest instructions they use.
// Steamroller's and Excavator's follow Piledriver's and Haswell's; Zen's are Haswell's.
const std::pair<const char*, VectorIsa> kKernelIsa[] = {
    {"Katmai", VectorIsa::kSse},        {"Coppermine", VectorIsa::kSse},
    {"Northwood", VectorIsa::kSse},     {"Prescott", VectorIsa::kSse},
    {"Banias", VectorIsa::kSse},        {"Atom", VectorIsa::kSse},
    {"Core2", VectorIsa::kSse},         {"Penryn", VectorIsa::kSse},
    {"Dunnington", VectorIsa::kSse},    {"Nehalem", VectorIsa::kSse},
    {"Athlon", VectorIsa::kSse},        {"Opteron", VectorIsa::kSse},
    {"Opteron_SSE3", VectorIsa::kSse},  {"Barcelona", VectorIsa::kSse},
    {"Nano", VectorIsa::kSse},          {"Bobcat", VectorIsa::kSse},
    {"Sandybridge", VectorIsa::kAvx},   {"Bulldozer", VectorIsa::kAvx},
    {"Piledriver", VectorIsa::kAvx},    {"Steamroller", VectorIsa::kAvx},
    {"Haswell", VectorIsa::kAvx2},      {"Excavator", VectorIsa::kAvx2},
    {"Zen", VectorIsa::kAvx2},          {"SkylakeX", VectorIsa::kAvx512},
    {"Cooperlake", VectorIsa::kAvx512}, {"SapphireRapids", VectorIsa::kAvx512}};

std::optional<VectorIsa> kernel_isa(const std::string& kernels) {
  for (const auto& [name, isa] : kKernelIsa) {
    if (strcasecmp(name, kernels.c_str()) == 0) return isa;
  }
  return std::nullopt;
}

// The set to ask for, per instruction set. AVX-512 asks for SkylakeX even where the CPU has
// AVX512-BF16: OpenBLAS 0.3.21 cannot be forced to Cooperlake (its name loop stops one short),
// and Cooperlake's fp32 kernels are SkylakeX's (it adds only bf16 ones).
const char* kernels_for(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kAvx512: return "SkylakeX";
    case VectorIsa::kAvx2: return "Haswell";
    case VectorIsa::kAvx: return "Sandybridge";
    case VectorIsa::kSse: return "Prescott";
  }
  return "Prescott";
}

template <typename Function>
Function* find_function(const char* name) {
  return reinterpret_cast<Function*>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

BlasInfo query_blas() {
  BlasInfo blas;
  auto* get_config = find_function<char*()>("openblas_get_config");
  auto* get_corename = find_function<char*()>("openblas_get_corename");
  if (get_config == nullptr || get_corename == nullptr) return blas;
  blas.openblas = true;
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP Cooperlake MAX_THREADS=64"
  const std::vector<std::string> config = split(get_config(), ' ');
  if (config.size() > 1) blas.version = config[1];
  blas.kernels = get_corename();
  auto has = [&](const char* word) {
    for (const auto& part : config) {
      if (part == word) return true;
    }
    return false;
  };
  blas.dynamic_arch = has("DYNAMIC_ARCH");
  // An OpenMP build runs as many threads as OpenMP allows at each call (LibTorch sets that);
  // its own count is updated only then.
  auto* omp_threads = find_function<int()>("omp_get_max_threads");
  auto* own_threads = find_function<int()>("openblas_get_num_threads");
  if (has("USE_OPENMP") && omp_threads != nullptr) {
    blas.threads = omp_threads();
  } else if (own_threads != nullptr) {
    blas.threads = own_threads();
  }
  return blas;
}

std::optional<std::string> matching_coretype(const CpuFeatures& cpu, const std::string& current) {
  const auto running = kernel_isa(current);
  const VectorIsa best = vector_isa(cpu);
  if (!running || *running >= best) return std::nullopt;
  return std::string(kernels_for(best));
}

std::optional<std::string> better_coretype(const CpuFeatures& cpu, const BlasInfo& blas,
                                           const char* user_value) {
  if (!blas.openblas || !blas.dynamic_arch || user_value != nullptr) return std::nullopt;
  return matching_coretype(cpu, blas.kernels);
}

void choose_better_blas_kernels(char** argv) {
  if (std::getenv(kSwitchedFromVariable) != nullptr) return;  // this is the second execution
  const BlasInfo blas = query_blas();
  const auto target = better_coretype(read_cpu_features(), blas, std::getenv(kCoretypeVariable));
  if (!target) return;
  setenv(kCoretypeVariable, target->c_str(), 1);
  setenv(kSwitchedFromVariable, blas.kernels.c_str(), 1);
  restart_argv = argv;
}

void restart_with_better_blas_kernels() {
  if (restart_argv == nullptr) return;
  execv("/proc/self/exe", restart_argv);
  // Still here: exec failed. Undo, so that the variable is not taken for the user's choice.
  unsetenv(kCoretypeVariable);
  unsetenv(kSwitchedFromVariable);
  restart_argv = nullptr;
}

std::string blas_line(const CpuFeatures& cpu, const BlasInfo& blas, const char* switched_from) {
  const std::string cpu_text = fmt::format(
      "CPU: {}, {}", cpu_display_name(cpu.model_name, cpu.kernel_model_name), feature_summary(cpu));
  if (!blas.openblas) {
    return "BLAS: not OpenBLAS (LibTorch's BLAS chooses its own kernels; " + cpu_text + ")";
  }
  const std::string chosen_by =
      switched_from == nullptr
          ? ""
          : fmt::format(", set by kiln over OpenBLAS's choice, {}", switched_from);
  return fmt::format("BLAS: OpenBLAS {} (kernels {}{}, {} thread{}; {})", blas.version,
                     blas.kernels, chosen_by, blas.threads, blas.threads == 1 ? "" : "s", cpu_text);
}

std::optional<std::string> blas_warning(const CpuFeatures& cpu, const BlasInfo& blas,
                                        const char* user_value, const char* switched_from) {
  if (!blas.openblas) return std::nullopt;
  const auto target = matching_coretype(cpu, blas.kernels);
  if (!target) return std::nullopt;
  const std::string narrower =
      fmt::format("OpenBLAS {} runs its {} kernels on a CPU with {}, whose {} kernels are faster",
                  blas.version, blas.kernels, isa_name(vector_isa(cpu)), *target);
  if (switched_from != nullptr) {
    return fmt::format(
        "warning: {}, though kiln set OPENBLAS_CORETYPE={}: check `OPENBLAS_VERBOSE=2 "
        "OPENBLAS_CORETYPE={} kiln plugins` prints 'Core: {}', or use an OpenBLAS that has them",
        narrower, user_value == nullptr ? "" : user_value, *target, *target);
  }
  if (user_value != nullptr) {
    return fmt::format(
        "warning: {}, as OPENBLAS_CORETYPE={} asks: unset it, or run `export "
        "OPENBLAS_CORETYPE={}`",
        narrower, user_value, *target);
  }
  if (!blas.dynamic_arch) {
    return fmt::format(
        "warning: {}, and this OpenBLAS has no others (built without DYNAMIC_ARCH): install one "
        "built with it (Debian's libopenblas0), then `export OPENBLAS_CORETYPE={}` if needed",
        narrower, *target);
  }
  return fmt::format(
      "warning: {}, and kiln could not restart itself with them: run `export "
      "OPENBLAS_CORETYPE={}` before kiln",
      narrower, *target);
}

std::string BlasReport::text() const {
  return warning ? line + "\n" + *warning : line;
}

BlasReport blas_report() {
  const CpuFeatures cpu = read_cpu_features();
  const BlasInfo blas = query_blas();
  // In a process that set the variables for the kiln processes it starts and did not execute
  // itself again, they do not describe its own kernels.
  const bool own = restart_argv == nullptr;
  const char* switched_from = own ? std::getenv(kSwitchedFromVariable) : nullptr;
  const char* user_value = own ? std::getenv(kCoretypeVariable) : nullptr;
  const std::string onednn = onednn_version();
  const std::string linear =
      onednn.empty() ? "; linear layers: LibTorch's (no oneDNN sgemm in this process)"
                     : "; linear layers: " + onednn + " with model.kernels = fused" +
                           (onednn_has_bf16_gemm() ? " (bf16 GEMMs under precision bf16)" : "");
  return {blas_line(cpu, blas, switched_from) + linear + "; malloc: " + malloc_name(),
          blas_warning(cpu, blas, user_value, switched_from)};
}

std::string malloc_name() {
  using Mallctl = int(const char*, void*, size_t*, void*, size_t);
  auto* mallctl = find_function<Mallctl>("mallctl");
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (mallctl == nullptr || mallctl("version", &version, &size, nullptr, 0) != 0) {
    return "the C library's (each tensor over 32 MB mapped anew: docs/speed.md)";
  }
  return std::string("jemalloc ") + version;
}

std::string onednn_version() {
  // dnnl_version() gives {major, minor, patch, hash, cpu_runtime, gpu_runtime}.
  struct Version {
    int major, minor, patch;
    const char* hash;
    unsigned cpu_runtime, gpu_runtime;
  };
  auto* version = find_function<const Version*()>("dnnl_version");
  if (find_function<void>("dnnl_sgemm") == nullptr || version == nullptr) return "";
  const Version* v = version();
  return fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
}

bool onednn_has_bf16_gemm() {
  return !onednn_version().empty() && find_function<void>("dnnl_gemm_bf16bf16f32") != nullptr;
}

}  // namespace kiln
