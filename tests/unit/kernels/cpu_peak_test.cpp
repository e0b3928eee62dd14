// The CPU as cpuid reads it (core/kernels/cpu_features.h), checked against the kernel's own reading
// in /proc/cpuinfo, and the hardware peak MFU is measured against (core/kernels/cpu_peak.h),
// checked against the vector units' published FLOP per cycle (vendors' optimisation manuals;
// Agner Fog's instruction tables).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/kernels/cpu_peak.h"
#include "core/kernels/kernel_cpuinfo.h"

namespace kiln {
namespace {

CpuFeatures cpu_with(const std::string& vendor, int family, int model, bool fma, bool avx2,
                     bool avx512);

// This machine: the flags cpuid (with the OS's saved state) reports agree with the kernel's
// reading, the facts Kiln chooses BLAS kernels and peaks by. The name is not compared: a
// hypervisor may rewrite one copy of it and not the other (CpuInfoFixtures below).
TEST(CpuFeatures, AgreeWithTheKernelsCpuinfo) {
  const KernelCpuInfo kernel = read_kernel_cpuinfo();
  if (!kernel.flags) GTEST_SKIP() << "SKIP: no x86 /proc/cpuinfo flags on this machine";
  const CpuFeatures cpu = read_cpu_features();
  EXPECT_EQ(cpu_disagreements(cpu, kernel), std::vector<std::string>{})
      << "cpuid brand '" << cpu.model_name << "', kernel's model name '" << kernel.model_name
      << "'";
  EXPECT_EQ(cpu.kernel_model_name, kernel.model_name);
}

// Recorded /proc/cpuinfo first blocks, cut to the fields Kiln reads and the flags of interest.
// This project's 2-vCPU EPYC (Zen 4), where cpuid's brand string is "AMD EPYC" too.
constexpr const char* kEpycZen4 = R"(processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC
stepping	: 1
cpu MHz		: 2596.150
flags		: fpu sse sse2 fma avx avx2 avx512f avx512dq avx512bw avx512vl avx512_bf16 hypervisor

processor	: 1
vendor_id	: GenuineIntel
model name	: the second block is never read
)";

// A CI machine (an Oxide VM): the kernel says "AMD EPYC" while cpuid's brand
// string is "Oxide Virtual Turin-like Processor".
constexpr const char* kOxideVm = R"(processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC
flags		: fpu sse sse2 fma avx avx2 avx512f avx512dq avx512bw avx512vl avx512_bf16 hypervisor
)";

// A kernel that prints no model name (older kernels under some hypervisors).
constexpr const char* kNoModelName = R"(processor	: 0
vendor_id	: GenuineIntel
cpu family	: 6
model		: 85
flags		: fpu sse sse2 avx fma avx2 avx512f avx512dq avx512bw avx512vl
)";

// An arm64 kernel: no vendor_id, no flags line.
constexpr const char* kArm64 = R"(processor	: 0
BogoMIPS	: 50.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics
CPU implementer	: 0x41
)";

CpuFeatures zen4_cpuid(const std::string& brand) {
  CpuFeatures cpu = cpu_with("AuthenticAMD", 25, 17, true, true, true);
  cpu.avx512_bf16 = true;
  cpu.model_name = brand;
  return cpu;
}

TEST(CpuInfoFixtures, FieldsOfTheFirstProcessorAreRead) {
  const KernelCpuInfo info = parse_kernel_cpuinfo(kEpycZen4);
  EXPECT_EQ(info.vendor, "AuthenticAMD");
  EXPECT_EQ(info.family, 25);
  EXPECT_EQ(info.model, 17);
  EXPECT_EQ(info.model_name, "AMD EPYC");
  ASSERT_TRUE(info.flags);
  EXPECT_EQ(info.flags->count("avx512_bf16"), 1u);
  EXPECT_EQ(info.flags->count("amx_tile"), 0u);
}

TEST(CpuInfoFixtures, AgreeingFlagsUnderDifferentNamesAreNoDisagreement) {
  const CpuFeatures oxide = zen4_cpuid("Oxide Virtual Turin-like Processor");
  const KernelCpuInfo kernel = parse_kernel_cpuinfo(kOxideVm);
  EXPECT_EQ(cpu_disagreements(oxide, kernel), std::vector<std::string>{});
  // Both names are shown: a user comparing machines may know either.
  EXPECT_EQ(cpu_display_name(oxide.model_name, kernel.model_name),
            "Oxide Virtual Turin-like Processor (kernel: AMD EPYC)");
  EXPECT_EQ(cpu_display_name("AMD EPYC", parse_kernel_cpuinfo(kEpycZen4).model_name), "AMD EPYC");
}

TEST(CpuInfoFixtures, AFlagOrFamilyTheKernelDisagreesOnIsNamed) {
  CpuFeatures cpu = zen4_cpuid("AMD EPYC");
  cpu.avx512_bf16 = false;  // as if the OS did not save the zmm state for this one
  cpu.family = 26;
  EXPECT_EQ(cpu_disagreements(cpu, parse_kernel_cpuinfo(kEpycZen4)),
            (std::vector<std::string>{"avx512_bf16: cpuid no, kernel yes",
                                      "cpu family: cpuid 26, kernel 25"}));
}

TEST(CpuInfoFixtures, AKernelWithoutModelNameOrFlags) {
  const KernelCpuInfo no_name = parse_kernel_cpuinfo(kNoModelName);
  EXPECT_EQ(no_name.model_name, "");
  CpuFeatures skylake = cpu_with("GenuineIntel", 6, 85, true, true, true);
  EXPECT_EQ(cpu_disagreements(skylake, no_name), std::vector<std::string>{});
  skylake.model_name = "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz";
  EXPECT_EQ(cpu_display_name(skylake.model_name, no_name.model_name), skylake.model_name);
  EXPECT_EQ(cpu_display_name("", "AMD EPYC"), "AMD EPYC");
  EXPECT_EQ(cpu_display_name("", ""), "unknown model");
  // No flags to compare with: nothing is claimed to disagree.
  const KernelCpuInfo arm = parse_kernel_cpuinfo(kArm64);
  EXPECT_EQ(arm.flags, std::nullopt);
  EXPECT_EQ(cpu_disagreements(skylake, arm), std::vector<std::string>{});
  EXPECT_EQ(parse_kernel_cpuinfo("").flags, std::nullopt);
}

TEST(CpuInfoFixtures, WithoutCpufreqTheClockIsTheTimedOne) {
  EXPECT_EQ(fastest_clock_hz(std::nullopt, 3.1e9), 3.1e9);
  EXPECT_EQ(fastest_clock_hz(3700000, 2.9e9), 3.7e9);  // cpufreq's maximum, in kHz
  EXPECT_EQ(fastest_clock_hz(3700000, 4.1e9), 4.1e9);  // a boost above cpufreq's nominal
  EXPECT_EQ(fastest_clock_hz(0, 0), 0);                // neither: the peak is left unknown
}

CpuFeatures cpu_with(const std::string& vendor, int family, int model, bool fma, bool avx2,
                     bool avx512) {
  CpuFeatures cpu;
  cpu.vendor = vendor;
  cpu.family = family;
  cpu.model = model;
  cpu.avx = true;
  cpu.fma = fma;
  cpu.avx2 = avx2;
  cpu.avx512f = cpu.avx512dq = cpu.avx512bw = cpu.avx512vl = avx512;
  return cpu;
}

int fp32(const CpuFeatures& cpu) {
  return flops_per_cycle(cpu, "fp32").value().flops;
}

TEST(CpuPeak, Fp32FlopsPerCycleAreThePublishedOnes) {
  // Sandy Bridge: one 256-bit multiply and one add per cycle.
  EXPECT_EQ(fp32(cpu_with("GenuineIntel", 6, 0x2a, false, false, false)), 16);
  // Haswell: two 256-bit FMA units.
  EXPECT_EQ(fp32(cpu_with("GenuineIntel", 6, 0x3c, true, true, false)), 32);
  // Skylake-SP Gold 6000 / Platinum, Sapphire Rapids: two 512-bit FMA units.
  EXPECT_EQ(fp32(cpu_with("GenuineIntel", 6, 0x55, true, true, true)), 64);
  // Zen (family 17h, model 1): two 128-bit FMA pipes.
  EXPECT_EQ(fp32(cpu_with("AuthenticAMD", 0x17, 0x01, true, true, false)), 16);
  // Zen 2 (17h, model 31h) and Zen 3 (19h, model 1): two 256-bit FMA pipes.
  EXPECT_EQ(fp32(cpu_with("AuthenticAMD", 0x17, 0x31, true, true, false)), 32);
  EXPECT_EQ(fp32(cpu_with("AuthenticAMD", 0x19, 0x01, true, true, false)), 32);
  // Zen 4 (19h, model 11h, this project's EPYC): AVX-512 on the same 256-bit pipes.
  EXPECT_EQ(fp32(cpu_with("AuthenticAMD", 0x19, 0x11, true, true, true)), 32);
  // Zen 5 (1Ah): 512-bit pipes.
  EXPECT_EQ(fp32(cpu_with("AuthenticAMD", 0x1a, 0x02, true, true, true)), 64);
}

TEST(CpuPeak, Bf16UsesTheBf16Units) {
  CpuFeatures zen4 = cpu_with("AuthenticAMD", 0x19, 0x11, true, true, true);
  zen4.avx512_bf16 = true;  // vdpbf16ps: two products per fp32 lane
  CpuFeatures sapphire_rapids = cpu_with("GenuineIntel", 6, 0x8f, true, true, true);
  sapphire_rapids.avx512_bf16 = sapphire_rapids.amx_tile = sapphire_rapids.amx_bf16 = true;
  EXPECT_EQ(flops_per_cycle(sapphire_rapids, "bf16").value().flops, 1024);
  // The dot product's timed rate decides: at an FMA's rate (Zen 4, its 256-bit pipes) twice the
  // fp32 FLOP; at a quarter of it (an Emerald Rapids Xeon with AMX hidden: one every two cycles
  // against two FMAs) half, so bf16 is worth no more than fp32 there; not timed, the fp32 rate.
  EXPECT_EQ(flops_per_cycle(zen4, "bf16", 1.0).value().flops, 64);
  CpuFeatures emerald_rapids = cpu_with("GenuineIntel", 6, 0xcf, true, true, true);
  emerald_rapids.avx512_bf16 = true;
  EXPECT_EQ(flops_per_cycle(emerald_rapids, "bf16", 0.25).value().flops, 64);
  EXPECT_EQ(flops_per_cycle(emerald_rapids, "bf16", 0.75).value().flops, 96);
  EXPECT_EQ(flops_per_cycle(zen4, "bf16", 0).value().flops, 32);
  // Without bf16 instructions bf16 runs at the fp32 rate.
  EXPECT_EQ(flops_per_cycle(cpu_with("GenuineIntel", 6, 0x3c, true, true, false), "bf16")->flops,
            32);
  EXPECT_EQ(flops_per_cycle(zen4, "Half"), std::nullopt);
}

TEST(CpuPeak, IsCoresTimesClockTimesFlopsPerCycle) {
  const CpuFeatures zen4 = cpu_with("AuthenticAMD", 0x19, 0x11, true, true, true);
  const auto peak = cpu_peak(zen4, "fp32", 2, 3.7e9);
  ASSERT_TRUE(peak);
  EXPECT_DOUBLE_EQ(peak->flops, 2 * 3.7e9 * 32);
  EXPECT_EQ(describe_peak(*peak, "fp32").rfind("2 cores x 3.70 GHz x 32 fp32 FLOP/cycle: ", 0), 0u)
      << describe_peak(*peak, "fp32");
  EXPECT_EQ(cpu_peak(zen4, "fp32", 0, 3.7e9), std::nullopt);
}

// Plausible bounds only: the timed clock depends on what else runs, so it is never compared with
// the kernel's "cpu MHz" (a VM's nominal clock, a host's current one).
TEST(CpuPeak, ThisMachinesCoresAndClockArePlausible) {
  const int cores = available_cores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const double clock = core_clock_hz();
  if (clock == 0) GTEST_SKIP() << "SKIP: no cpufreq and not x86: the clock is unknown here";
  // No x86 core of the last 20 years runs below 100 MHz or above 7 GHz, even timed on a loaded
  // machine or under emulation.
  EXPECT_GT(clock, 1e8);
  EXPECT_LT(clock, 7e9);
}

// The published rates of vdpbf16ps zmm against vfmadd231ps zmm run from a quarter (Intel without
// AMX) to one (AMD Zen 4); a CPU without AVX512-BF16 is never timed.
TEST(CpuPeak, TheTimedBf16DotProductRateIsPlausible) {
  const CpuFeatures cpu = read_cpu_features();
  const double ratio = timed_bf16_dot_ratio(cpu);
  if (!cpu.avx512_bf16) {
    EXPECT_EQ(ratio, 0);
    return;
  }
  EXPECT_GT(ratio, 0.1);
  EXPECT_LT(ratio, 2.0);
}

}  // namespace
}  // namespace kiln
