#include "core/kernels/cpu_features.h"

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define KILN_X86 1
#else
#define KILN_X86 0
#endif

#include "core/kernels/kernel_cpuinfo.h"
#include "core/util/text.h"

namespace kiln {

namespace {

#if KILN_X86

struct Registers {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Registers cpuid(uint32_t leaf, uint32_t subleaf = 0) {
  Registers r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

bool bit(uint32_t reg, int index) {
  return (reg >> index) & 1u;
}

// XCR0: which register states the OS saves on a context switch.
uint64_t os_saved_state() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

std::string vendor_id() {
  const Registers r = cpuid(0);
  char id[13] = {};
  std::memcpy(id, &r.ebx, 4);
  std::memcpy(id + 4, &r.edx, 4);
  std::memcpy(id + 8, &r.ecx, 4);
  return id;
}

std::string brand_string() {
  if (cpuid(0x80000000).eax < 0x80000004) return "";
  char brand[49] = {};
  for (uint32_t i = 0; i < 3; ++i) {
    const Registers r = cpuid(0x80000002 + i);
    std::memcpy(brand + 16 * i, &r, 16);
  }
  std::string name = brand;
  const size_t first = name.find_first_not_of(' ');
  const size_t last = name.find_last_not_of(' ');
  return first == std::string::npos ? "" : name.substr(first, last - first + 1);
}

#endif

}  // namespace

CpuFeatures read_cpu_features() {
  CpuFeatures cpu;
#if KILN_X86
  const uint32_t max_leaf = cpuid(0).eax;
  cpu.vendor = vendor_id();
  cpu.model_name = brand_string();
  const Registers basic = cpuid(1);
  const int base_family = static_cast<int>((basic.eax >> 8) & 0xf);
  cpu.family =
      base_family == 0xf ? base_family + static_cast<int>((basic.eax >> 20) & 0xff) : base_family;
  cpu.model = static_cast<int>((basic.eax >> 4) & 0xf);
  // As Linux adds it (arch/x86/lib/cpu.c): for every family from 6 on, which includes
  // Zhaoxin's 7, where Intel's manual names only 6 and 0xf. Then "model" agrees with the kernel's.
  if (base_family >= 0x6) {
    cpu.model += static_cast<int>((basic.eax >> 16) & 0xf) << 4;
  }
  const uint64_t saved = bit(basic.ecx, 27) ? os_saved_state() : 0;  // OSXSAVE: xgetbv allowed
  const bool ymm = (saved & 0x6) == 0x6;                             // SSE and AVX state
  const bool zmm = ymm && (saved & 0xe0) == 0xe0;   // opmask and both halves of zmm0-31
  const bool tiles = (saved & 0x60000) == 0x60000;  // XTILECFG and XTILEDATA
  cpu.avx = ymm && bit(basic.ecx, 28);
  cpu.fma = cpu.avx && bit(basic.ecx, 12);
  if (max_leaf >= 7) {
    const Registers extended = cpuid(7, 0);
    cpu.avx2 = cpu.avx && bit(extended.ebx, 5);
    cpu.avx512f = zmm && bit(extended.ebx, 16);
    cpu.avx512dq = zmm && bit(extended.ebx, 17);
    cpu.avx512bw = zmm && bit(extended.ebx, 30);
    cpu.avx512vl = zmm && bit(extended.ebx, 31);
    cpu.amx_bf16 = tiles && bit(extended.edx, 22);
    cpu.amx_tile = tiles && bit(extended.edx, 24);
    if (extended.eax >= 1) cpu.avx512_bf16 = zmm && bit(cpuid(7, 1).eax, 5);
  }
#endif
  cpu.kernel_model_name = read_kernel_cpuinfo().model_name;
  return cpu;
}

VectorIsa vector_isa(const CpuFeatures& cpu) {
  if (cpu.avx512f && cpu.avx512dq && cpu.avx512bw && cpu.avx512vl) return VectorIsa::kAvx512;
  if (cpu.avx2 && cpu.fma) return VectorIsa::kAvx2;
  if (cpu.avx) return VectorIsa::kAvx;
  return VectorIsa::kSse;
}

const char* isa_name(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kAvx512: return "AVX-512";
    case VectorIsa::kAvx2: return "AVX2";
    case VectorIsa::kAvx: return "AVX";
    case VectorIsa::kSse: return "SSE";
  }
  return "SSE";
}

std::vector<std::pair<const char*, bool>> named_features(const CpuFeatures& cpu) {
  return {{"avx", cpu.avx},           {"avx2", cpu.avx2},
          {"fma", cpu.fma},           {"avx512f", cpu.avx512f},
          {"avx512dq", cpu.avx512dq}, {"avx512bw", cpu.avx512bw},
          {"avx512vl", cpu.avx512vl}, {"avx512_bf16", cpu.avx512_bf16},
          {"amx_tile", cpu.amx_tile}, {"amx_bf16", cpu.amx_bf16}};
}

std::string feature_summary(const CpuFeatures& cpu) {
  static const std::set<std::string> shown = {"avx2",        "fma",      "avx512f",
                                              "avx512_bf16", "amx_tile", "amx_bf16"};
  std::vector<std::string> present;
  for (const auto& [name, has] : named_features(cpu)) {
    if (has && shown.count(name)) present.emplace_back(name);
  }
  return present.empty() ? "none" : join(present, " ");
}

}  // namespace kiln
