#include "core/kernels/cpu_peak.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <set>
#include <utility>

#include <fmt/format.h>

namespace kiln {

namespace {

// The width of the FMA units (bits) where it is narrower than the instruction set: AMD ran
// 256-bit and 512-bit instructions on narrower units until Zen 5 (family 1Ah).
int datapath_bits(const CpuFeatures& cpu, int isa_bits, std::string& note) {
  if (cpu.vendor != "AuthenticAMD") return isa_bits;
  int bits = isa_bits;
  if (cpu.family == 0x17 && cpu.model < 0x30) {
    bits = 128;  // Zen, Zen+: 128-bit units
  } else if (cpu.family == 0x17 || cpu.family == 0x19) {
    bits = 256;  // Zen 2, 3, 4
  }
  if (bits < isa_bits) {
    note = fmt::format(" ({}-bit units: AMD family {:x}h runs {}-bit instructions on them)", bits,
                       cpu.family, isa_bits);
  }
  return std::min(bits, isa_bits);
}

int isa_bits(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kAvx512: return 512;
    case VectorIsa::kAvx2:
    case VectorIsa::kAvx: return 256;
    case VectorIsa::kSse: return 128;
  }
  return 128;
}

std::optional<int64_t> read_integer(const std::string& path) {
  std::ifstream in(path);
  int64_t value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

// A chain of dependent register adds, each waiting for the one before: one per cycle. Not
// `add $1`: a renamer may fold immediate adds (Intel's Golden Cove does).
double timed_add_chain_hz() {
#if defined(__x86_64__) || defined(__i386__)
  constexpr int64_t kIterations = 100000;
  constexpr int kAddsPerIteration = 20;
  double best = 0;
  for (int round = 0; round < 20; ++round) {
    uint64_t x = 1;
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < kIterations; ++i) {
#define KILN_ADD4 "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
      __asm__ volatile(KILN_ADD4 KILN_ADD4 KILN_ADD4 KILN_ADD4 KILN_ADD4 : "+r"(x) : : "memory");
#undef KILN_ADD4
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 0) best = std::max(best, kIterations * kAddsPerIteration / seconds);
  }
  return best;
#else
  return 0;
#endif
}

}  // namespace

std::optional<FlopsPerCycle> flops_per_cycle(const CpuFeatures& cpu, const std::string& dtype,
                                             double bf16_dot_ratio) {
  const VectorIsa isa = vector_isa(cpu);
  std::string note;
  const int lanes = datapath_bits(cpu, isa_bits(isa), note) / 32;
  // Without FMA a multiply unit and an add unit give the same two FLOP per lane and cycle as
  // one FMA unit.
  const int units = cpu.fma ? 2 : 1;
  const int fp32 = 2 * units * lanes;
  const std::string fp32_why =
      fmt::format("{} {} x {} fp32 lanes x 2 FLOP{}", units,
                  cpu.fma ? "FMA units" : "multiply+add pair", lanes, note);
  if (dtype == "fp32") return FlopsPerCycle{fp32, fp32_why};
  if (dtype != "bf16") return std::nullopt;
  if (cpu.amx_bf16) return FlopsPerCycle{1024, "AMX: 1024 bf16 FLOP per cycle"};
  if (cpu.avx512_bf16 && bf16_dot_ratio > 0) {
    const int dot = static_cast<int>(2 * fp32 * bf16_dot_ratio + 0.5);
    if (dot > fp32) {
      return FlopsPerCycle{
          dot, fmt::format("AVX512-BF16: two bf16 products per fp32 lane at {:.2f}x the FMA rate "
                           "(timed), {}",
                           bf16_dot_ratio, fp32_why)};
    }
    return FlopsPerCycle{
        fp32, fmt::format("AVX512-BF16's dot product timed at {:.2f}x the FMA rate, so no faster: "
                          "bf16 at the fp32 rate, {}",
                          bf16_dot_ratio, fp32_why)};
  }
  return FlopsPerCycle{fp32, "no bf16 instructions timed: bf16 at the fp32 rate, " + fp32_why};
}

#if defined(__x86_64__)
// `count` rounds of "OP zmm12, zmm13, zmm<k>" on twelve independent accumulators, more than
// either instruction's latency times its rate, every register zeroed first (no denormal to slow
// them); vzeroupper after, so that the SSE code around pays no transition for the zmm state.
// clang-format off
#define KILN_ON(OP, K) OP " %%zmm12, %%zmm13, %%zmm" #K "\n\t"
#define KILN_ZERO(K) "vxorps %%xmm" #K ", %%xmm" #K ", %%xmm" #K "\n\t"
#define KILN_TWELVE_ACCUMULATORS(OP, count)                                                \
  __asm__ volatile(                                                                        \
      KILN_ZERO(0) KILN_ZERO(1) KILN_ZERO(2) KILN_ZERO(3) KILN_ZERO(4) KILN_ZERO(5)        \
      KILN_ZERO(6) KILN_ZERO(7) KILN_ZERO(8) KILN_ZERO(9) KILN_ZERO(10) KILN_ZERO(11)      \
      KILN_ZERO(12) KILN_ZERO(13)                                                          \
      "1:\n\t"                                                                             \
      KILN_ON(OP, 0) KILN_ON(OP, 1) KILN_ON(OP, 2) KILN_ON(OP, 3) KILN_ON(OP, 4)           \
      KILN_ON(OP, 5) KILN_ON(OP, 6) KILN_ON(OP, 7) KILN_ON(OP, 8) KILN_ON(OP, 9)           \
      KILN_ON(OP, 10) KILN_ON(OP, 11)                                                      \
      "dec %0\n\tjnz 1b\n\tvzeroupper\n\t"                                                \
      : "+r"(count)                                                                        \
      :                                                                                    \
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",    \
        "xmm10", "xmm11", "xmm12", "xmm13", "cc", "memory")
// clang-format on

void fma_rounds(int64_t count) {
  KILN_TWELVE_ACCUMULATORS("vfmadd231ps", count);
}
void bf16_dot_rounds(int64_t count) {
  KILN_TWELVE_ACCUMULATORS("vdpbf16ps", count);
}
#undef KILN_TWELVE_ACCUMULATORS
#undef KILN_ZERO
#undef KILN_ON

// Instructions per second of `rounds(count)` (12 instructions a round).
double instruction_rate(void (*rounds)(int64_t), int64_t count) {
  const auto start = std::chrono::steady_clock::now();
  rounds(count);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return seconds > 0 ? 12.0 * static_cast<double>(count) / seconds : 0;
}
#endif

double timed_bf16_dot_ratio(const CpuFeatures& cpu) {
#if defined(__x86_64__)
  if (!cpu.avx512_bf16) return 0;
  // A millisecond or so first, untimed: Intel's cores take tens to hundreds of microseconds to
  // power their 512-bit units up and settle the clock. Then the best of five rounds of each,
  // alternated, so that a change of clock or a neighbour's burst weighs on both.
  constexpr int64_t kRounds = 100000;  // 1.2 million instructions: 0.2-1 ms
  fma_rounds(4 * kRounds);
  double fma = 0, dot = 0;
  for (int round = 0; round < 5; ++round) {
    fma = std::max(fma, instruction_rate(fma_rounds, kRounds));
    dot = std::max(dot, instruction_rate(bf16_dot_rounds, kRounds));
  }
  return fma > 0 ? dot / fma : 0;
#else
  (void)cpu;
  return 0;
#endif
}

int available_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
  std::set<std::pair<int64_t, int64_t>> cores;  // (package, core) pairs
  int logical = 0;
  bool topology_known = true;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    ++logical;
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu{}/topology/", cpu);
    const auto package = read_integer(dir + "physical_package_id");
    const auto core = read_integer(dir + "core_id");
    if (!package || !core) topology_known = false;
    if (topology_known) cores.emplace(*package, *core);
  }
  return topology_known ? static_cast<int>(cores.size()) : std::max(logical, 1);
}

double core_clock_hz() {
  return fastest_clock_hz(read_integer("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"),
                          timed_add_chain_hz());
}

double fastest_clock_hz(std::optional<int64_t> cpufreq_max_khz, double timed_hz) {
  const double cpufreq_hz =
      cpufreq_max_khz && *cpufreq_max_khz > 0 ? static_cast<double>(*cpufreq_max_khz) * 1e3 : 0.0;
  return std::max(cpufreq_hz, timed_hz);
}

std::optional<CpuPeak> cpu_peak(const CpuFeatures& cpu, const std::string& dtype, int cores,
                                double clock_hz, double bf16_dot_ratio) {
  const auto per_cycle = flops_per_cycle(cpu, dtype, bf16_dot_ratio);
  if (!per_cycle || cores < 1 || clock_hz <= 0) return std::nullopt;
  return CpuPeak{cores * clock_hz * per_cycle->flops, cores, clock_hz, *per_cycle};
}

std::string describe_peak(const CpuPeak& peak, const std::string& dtype) {
  return fmt::format("{} core{} x {:.2f} GHz x {} {} FLOP/cycle: {}", peak.cores,
                     peak.cores == 1 ? "" : "s", peak.clock_hz / 1e9, peak.per_cycle.flops, dtype,
                     peak.per_cycle.why);
}

}  // namespace kiln
