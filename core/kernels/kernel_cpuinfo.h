// The kernel's own reading of the CPU (/proc/cpuinfo), beside cpuid's (cpu_features.h). The two
// agree on the feature flags that choose kernels and peaks, which is what Kiln relies on; they
// may differ on the name, as hypervisors often rewrite the cpuid brand string but not the
// kernel's copy (an "Oxide Virtual Turin-like Processor" that the kernel calls "AMD EPYC"), so
// the name is informational and shown both ways when they differ. Torch-free.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/kernels/cpu_features.h"

namespace kiln {

// The first processor's fields of /proc/cpuinfo; every field empty where the kernel gives none.
struct KernelCpuInfo {
  std::string vendor;                          // "vendor_id"
  std::optional<int> family;                   // "cpu family"
  std::optional<int> model;                    // "model"
  std::string model_name;                      // "model name"; absent on some kernels and off x86
  std::optional<std::set<std::string>> flags;  // "flags"; nullopt off x86
};

// Parses a /proc/cpuinfo text (only the first processor's block is read).
KernelCpuInfo parse_kernel_cpuinfo(std::string_view text);

// This machine's /proc/cpuinfo; empty where it cannot be read.
KernelCpuInfo read_kernel_cpuinfo();

// Where cpuid (with the OS's saved register state) and the kernel disagree on a fact Kiln
// chooses kernels or peaks by: "avx512f: cpuid yes, kernel no", "cpu family: cpuid 25, kernel
// 26". Empty when they agree, or when the kernel gives no flags to compare.
std::vector<std::string> cpu_disagreements(const CpuFeatures& cpu, const KernelCpuInfo& kernel);

// The CPU's name as the BLAS line and `kiln bench` print it: cpuid's brand string, which is what
// this process sees now, with the kernel's name beside it when that differs, since a user
// comparing machines may know either: "Oxide Virtual Turin-like Processor (kernel: AMD EPYC)".
// The kernel's name alone when cpuid has none; "unknown model" when neither has one.
std::string cpu_display_name(const std::string& cpuid_name, const std::string& kernel_name);

}  // namespace kiln
