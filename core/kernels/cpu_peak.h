// The CPU's peak FLOP/s, the denominator of MFU as the field defines it (PaLM, appendix B: model
// FLOP/s achieved over the hardware's peak), where `kiln bench` had only a measured matmul:
// cores x clock x FLOP per cycle per core, from the vector unit cpuid reports. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/kernels/cpu_features.h"

namespace kiln {

// FLOP per cycle per core in one dtype, and why.
struct FlopsPerCycle {
  int flops = 0;
  std::string why;  // "2 FMA units x 8 fp32 lanes (256-bit: Zen 4 runs AVX-512 on 256-bit units)"
};

struct CpuPeak {
  double flops = 0;  // FLOP/s
  int cores = 0;
  double clock_hz = 0;
  FlopsPerCycle per_cycle;
};

// For "fp32" and "bf16"; nullopt for a dtype whose peak Kiln does not know. Assumes two FMA
// units per core when the CPU has FMA (Intel since Haswell and AVX-512 Xeons from Gold 6000 up;
// AMD since Zen), so Xeon Silver and Bronze, with one 512-bit unit, are credited twice their
// AVX-512 peak; AMD's AVX-512 before Zen 5 runs on 256-bit units; AMX does 1024 bf16 FLOP per
// cycle per core. AVX512-BF16's dot product does twice an FMA's FLOP per instruction, but not
// at an FMA's rate everywhere: `bf16_dot_ratio` is its rate over an FMA's, as
// timed_bf16_dot_ratio() measured it here, and bf16 is credited with the better of the dot
// product and the fp32 rate (bf16 widened to fp32 for the FMA units); 0 = not measured, the fp32
// rate.
std::optional<FlopsPerCycle> flops_per_cycle(const CpuFeatures& cpu, const std::string& dtype,
                                             double bf16_dot_ratio = 0);

// AVX512-BF16's vdpbf16ps over fp32's vfmadd231ps, instructions per second, both 512-bit and
// timed on independent registers: about 1 on AMD's Zen 4, 0.25 on the Emerald Rapids Xeon this
// project measured (one every two cycles against two FMAs a cycle). 0 where the CPU has no
// AVX512-BF16, or is not x86-64.
double timed_bf16_dot_ratio(const CpuFeatures& cpu);

// The cores this process may run on, an SMT sibling of one counted once (sysfs topology).
int available_cores();

// The fastest clock a core reaches: the larger of cpufreq's maximum, when the OS has one, and a
// timed chain of dependent adds (one per cycle on every x86 since the Pentium Pro), which finds
// the boost clock where cpufreq is absent (virtual machines) and reads low on a busy machine.
double core_clock_hz();

// core_clock_hz's choice: the larger of cpufreq's maximum (kHz; nullopt where the OS has no
// cpufreq, as in most virtual machines) and the timed clock (0 where it could not be timed).
double fastest_clock_hz(std::optional<int64_t> cpufreq_max_khz, double timed_hz);

// cores x clock x flops_per_cycle; nullopt where flops_per_cycle is.
std::optional<CpuPeak> cpu_peak(const CpuFeatures& cpu, const std::string& dtype, int cores,
                                double clock_hz, double bf16_dot_ratio = 0);

// "2 cores x 3.70 GHz x 32 fp32 FLOP/cycle (2 FMA units x 8 fp32 lanes ...)".
std::string describe_peak(const CpuPeak& peak, const std::string& dtype);

}  // namespace kiln
