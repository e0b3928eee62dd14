// The choice of BLAS kernels at start-up (core/util/blas_kernels.h): which OPENBLAS_CORETYPE
// kiln sets before executing itself again, and when it leaves the BLAS alone. The CPUs are
// written here from their published feature sets; the kernel names are OpenBLAS 0.3.21's
// (driver/others/dynamic.c).
#include <gtest/gtest.h>

#include "core/util/blas_kernels.h"

namespace kiln {
namespace {

CpuFeatures avx2_cpu() {  // Haswell, Zen 2 and 3
  CpuFeatures cpu;
  cpu.vendor = "GenuineIntel";
  cpu.avx = cpu.fma = cpu.avx2 = true;
  return cpu;
}

CpuFeatures avx512_cpu() {  // Skylake-SP
  CpuFeatures cpu = avx2_cpu();
  cpu.avx512f = cpu.avx512dq = cpu.avx512bw = cpu.avx512vl = true;
  return cpu;
}

CpuFeatures sapphire_rapids() {  // a cloud Xeon: AVX-512, AVX512-BF16, AMX
  CpuFeatures cpu = avx512_cpu();
  cpu.avx512_bf16 = cpu.amx_tile = cpu.amx_bf16 = true;
  return cpu;
}

BlasInfo openblas(const std::string& kernels) {
  BlasInfo blas;
  blas.openblas = true;
  blas.version = "0.3.21";
  blas.kernels = kernels;
  blas.dynamic_arch = true;
  blas.threads = 2;
  return blas;
}

TEST(BlasKernels, GenericKernelsOnAnAvx512CpuGetSkylakeX) {
  for (const char* generic : {"Prescott", "Core2", "Nehalem", "Katmai", "Barcelona"}) {
    EXPECT_EQ(better_coretype(avx512_cpu(), openblas(generic), nullptr), "SkylakeX") << generic;
  }
  // AVX2 kernels are narrower than AVX-512 too.
  EXPECT_EQ(better_coretype(avx512_cpu(), openblas("Haswell"), nullptr), "SkylakeX");
}

TEST(BlasKernels, TheIssuesXeonGetsSkylakeXWhichOpenBlas0321CanBeForcedTo) {
  // Cooperlake's fp32 kernels are SkylakeX's, and 0.3.21's OPENBLAS_CORETYPE loop stops before
  // the name Cooperlake.
  EXPECT_EQ(better_coretype(sapphire_rapids(), openblas("Prescott"), nullptr), "SkylakeX");
}

TEST(BlasKernels, AnAvx2CpuGetsHaswell) {
  EXPECT_EQ(better_coretype(avx2_cpu(), openblas("Prescott"), nullptr), "Haswell");
  EXPECT_EQ(better_coretype(avx2_cpu(), openblas("Sandybridge"), nullptr), "Haswell");
  CpuFeatures avx_only;
  avx_only.avx = true;
  EXPECT_EQ(better_coretype(avx_only, openblas("Nehalem"), nullptr), "Sandybridge");
}

TEST(BlasKernels, AvxFiveTwelveFoundationAloneIsNotSkylakeX) {
  CpuFeatures knights_landing = avx2_cpu();  // F but neither BW nor VL
  knights_landing.avx512f = true;
  EXPECT_EQ(better_coretype(knights_landing, openblas("Prescott"), nullptr), "Haswell");
  EXPECT_EQ(better_coretype(knights_landing, openblas("Haswell"), nullptr), std::nullopt);
}

TEST(BlasKernels, TheUsersVariableIsNeverOverridden) {
  EXPECT_EQ(better_coretype(avx512_cpu(), openblas("Prescott"), "Prescott"), std::nullopt);
  EXPECT_EQ(better_coretype(avx512_cpu(), openblas("Prescott"), ""), std::nullopt);
}

TEST(BlasKernels, MatchingKernelsAreLeftAlone) {
  EXPECT_EQ(better_coretype(avx512_cpu(), openblas("SkylakeX"), nullptr), std::nullopt);
  EXPECT_EQ(better_coretype(sapphire_rapids(), openblas("Cooperlake"), nullptr), std::nullopt);
  EXPECT_EQ(better_coretype(sapphire_rapids(), openblas("SapphireRapids"), nullptr), std::nullopt);
  EXPECT_EQ(better_coretype(avx2_cpu(), openblas("Zen"), nullptr), std::nullopt);
  EXPECT_EQ(better_coretype(avx2_cpu(), openblas("HASWELL"), nullptr), std::nullopt);
  EXPECT_EQ(better_coretype(CpuFeatures{}, openblas("Prescott"), nullptr), std::nullopt);
}

TEST(BlasKernels, WiderKernelsThanTheCpuAreNotNarrowed) {
  EXPECT_EQ(better_coretype(avx2_cpu(), openblas("SkylakeX"), nullptr), std::nullopt);
}

TEST(BlasKernels, AnotherBlasOrAFixedBuildOrAnUnknownNameIsLeftAlone) {
  EXPECT_EQ(better_coretype(avx512_cpu(), BlasInfo{}, nullptr), std::nullopt);
  BlasInfo fixed = openblas("Prescott");
  fixed.dynamic_arch = false;  // OPENBLAS_CORETYPE would change nothing
  EXPECT_EQ(better_coretype(avx512_cpu(), fixed, nullptr), std::nullopt);
  // A later OpenBLAS's name this table does not rank, and OpenBLAS's own "Unknown".
  EXPECT_EQ(better_coretype(avx512_cpu(), openblas("Zen5"), nullptr), std::nullopt);
  EXPECT_EQ(better_coretype(avx512_cpu(), openblas("Unknown"), nullptr), std::nullopt);
}

TEST(BlasKernels, TheLineNamesTheBlasItsKernelsThreadsAndTheCpu) {
  CpuFeatures cpu = sapphire_rapids();
  cpu.model_name = "Intel(R) Xeon(R) Processor";
  EXPECT_EQ(blas_line(cpu, openblas("SkylakeX"), nullptr),
            "BLAS: OpenBLAS 0.3.21 (kernels SkylakeX, 2 threads; CPU: Intel(R) Xeon(R) "
            "Processor, avx2 fma avx512f avx512_bf16 amx_tile amx_bf16)");
  EXPECT_EQ(blas_line(cpu, openblas("SkylakeX"), "Prescott"),
            "BLAS: OpenBLAS 0.3.21 (kernels SkylakeX, set by kiln over OpenBLAS's choice, "
            "Prescott, 2 threads; CPU: Intel(R) Xeon(R) Processor, avx2 fma avx512f avx512_bf16 "
            "amx_tile amx_bf16)");
  EXPECT_EQ(blas_line(CpuFeatures{}, BlasInfo{}, nullptr),
            "BLAS: not OpenBLAS (LibTorch's BLAS chooses its own kernels; CPU: unknown model, "
            "none)");
}

TEST(BlasKernels, AFallbackNotFixedIsOneWarningWithTheCommand) {
  // The user's value holds the slow kernels: the fix is to unset it or set the right one.
  const auto user = blas_warning(avx512_cpu(), openblas("Prescott"), "Prescott", nullptr);
  ASSERT_TRUE(user);
  EXPECT_NE(user->find("export OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << *user;
  EXPECT_NE(user->find("OPENBLAS_CORETYPE=Prescott"), std::string::npos) << *user;
  // Kiln could not restart itself.
  const auto unfixed = blas_warning(avx2_cpu(), openblas("Prescott"), nullptr, nullptr);
  ASSERT_TRUE(unfixed);
  EXPECT_NE(unfixed->find("export OPENBLAS_CORETYPE=Haswell"), std::string::npos) << *unfixed;
  for (const auto& warning : {*user, *unfixed}) {
    EXPECT_EQ(warning.rfind("warning: ", 0), 0u) << warning;
    EXPECT_EQ(warning.find('\n'), std::string::npos) << warning;
  }
  EXPECT_EQ(blas_warning(avx512_cpu(), openblas("SkylakeX"), nullptr, nullptr), std::nullopt);
  EXPECT_EQ(blas_warning(avx512_cpu(), BlasInfo{}, nullptr, nullptr), std::nullopt);
}

}  // namespace
}  // namespace kiln
