// What this CPU can run, read with cpuid: the hardware peak MFU is measured against (cpu_peak.h)
// and the instruction set oneDNN's bf16 products run on (cpu_runtime.h). A vector feature counts
// only when the OS also saves its registers (xgetbv), as a kernel using it would otherwise fault.
// Torch-free.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kiln {

struct CpuFeatures {
  std::string vendor;      // cpuid's vendor id: "GenuineIntel", "AuthenticAMD"; "" off x86
  std::string model_name;  // cpuid's brand string, as lscpu's "Model name"
  // /proc/cpuinfo's "model name", which a hypervisor may leave different from the brand string
  // (kernel_cpuinfo.h); "" where the kernel gives none. Informational: nothing is chosen by it.
  std::string kernel_model_name;
  int family = 0;  // with the extended family added, as /proc/cpuinfo's "cpu family"
  int model = 0;   // with the extended model added, as /proc/cpuinfo's "model"
  bool avx = false;
  bool fma = false;
  bool avx2 = false;
  bool avx512f = false;
  bool avx512dq = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
};

// The widest vector instruction set a kernel may use here. AVX-512 means Skylake-SP's set
// (F, DQ, BW, VL), the one AVX-512 kernels assume: Knights Landing's F alone is not.
enum class VectorIsa { kSse, kAvx, kAvx2, kAvx512 };

// This machine's CPU (all false off x86), and the kernel's name for it.
CpuFeatures read_cpu_features();

VectorIsa vector_isa(const CpuFeatures& cpu);
// "AVX-512", "AVX2", "AVX", "SSE".
const char* isa_name(VectorIsa isa);

// Every vector feature above by the name /proc/cpuinfo gives it, with whether this CPU has it.
std::vector<std::pair<const char*, bool>> named_features(const CpuFeatures& cpu);

// The features that decide kernels and peaks, named as /proc/cpuinfo names them:
// "avx2 fma avx512f avx512_bf16 amx_tile amx_bf16" (those present), "none" when none is.
std::string feature_summary(const CpuFeatures& cpu);

}  // namespace kiln
