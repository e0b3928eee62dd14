// The CPU as cpuid reads it (core/util/cpu_features.h), checked against the kernel's own reading
// in /proc/cpuinfo, and the hardware peak MFU is measured against (core/util/cpu_peak.h),
// checked against the vector units' published FLOP per cycle (vendors' optimisation manuals;
// Agner Fog's instruction tables).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/util/cpu_peak.h"

namespace kiln {
namespace {

// The first core's "key: value" lines of /proc/cpuinfo; empty off Linux x86.
std::map<std::string, std::string> cpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  std::map<std::string, std::string> fields;
  std::string line;
  while (std::getline(in, line) && !line.empty()) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    fields[key] = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
  }
  return fields;
}

TEST(CpuFeatures, AgreeWithTheKernelsCpuinfo) {
  const auto fields = cpuinfo();
  if (!fields.count("flags")) GTEST_SKIP() << "SKIP: no x86 /proc/cpuinfo on this machine";
  std::set<std::string> flags;
  std::istringstream words(fields.at("flags"));
  for (std::string word; words >> word;)
    flags.insert(word);
  const CpuFeatures cpu = read_cpu_features();
  const std::pair<bool, const char*> features[] = {
      {cpu.avx, "avx"},           {cpu.fma, "fma"},
      {cpu.avx2, "avx2"},         {cpu.avx512f, "avx512f"},
      {cpu.avx512dq, "avx512dq"}, {cpu.avx512bw, "avx512bw"},
      {cpu.avx512vl, "avx512vl"}, {cpu.avx512_bf16, "avx512_bf16"},
      {cpu.amx_tile, "amx_tile"}, {cpu.amx_bf16, "amx_bf16"}};
  for (const auto& [has, flag] : features)
    EXPECT_EQ(has, flags.count(flag) == 1) << flag;
  EXPECT_EQ(std::to_string(cpu.family), fields.at("cpu family"));
  EXPECT_EQ(std::to_string(cpu.model), fields.at("model"));
  EXPECT_EQ(cpu.model_name, fields.at("model name"));
  EXPECT_EQ(cpu.vendor, fields.at("vendor_id"));
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
  EXPECT_EQ(flops_per_cycle(zen4, "bf16").value().flops, 64);
  CpuFeatures sapphire_rapids = cpu_with("GenuineIntel", 6, 0x8f, true, true, true);
  sapphire_rapids.avx512_bf16 = sapphire_rapids.amx_tile = sapphire_rapids.amx_bf16 = true;
  EXPECT_EQ(flops_per_cycle(sapphire_rapids, "bf16").value().flops, 1024);
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

TEST(CpuPeak, ThisMachinesCoresAndClockArePlausible) {
  const int cores = available_cores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const double clock = core_clock_hz();
  if (clock == 0) GTEST_SKIP() << "SKIP: no cpufreq and not x86: the clock is unknown here";
  // Against the kernel's reading where it has one (a VM's is the nominal clock): boost goes
  // above it, and no x86 core of the last 20 years runs below a third of it or above 7 GHz.
  const auto fields = cpuinfo();
  if (fields.count("cpu MHz")) {
    EXPECT_GT(clock, std::stod(fields.at("cpu MHz")) * 1e6 / 3);
  }
  EXPECT_LT(clock, 7e9);
}

}  // namespace
}  // namespace kiln
