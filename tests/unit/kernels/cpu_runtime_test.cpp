// What runs the CPU products (core/kernels/cpu_runtime.h): the libraries read from LibTorch's build
// configuration, the copies of oneDNN and of an OpenMP runtime counted from a process's shared
// objects, and this very process (LibTorch loaded, products run in fp32 and bf16) holding one of
// each. The configuration text is LibTorch 2.15's own (torch.__config__.show() of PyPI's wheel);
// the CPUs are written from their published feature sets.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Version.h>

#include "core/kernels/cpu_runtime.h"
#include "core/util/text.h"

namespace kiln {
namespace {

const char* const kWheelConfig =
    "PyTorch built with:\n"
    "  - GCC 13.3\n"
    "  - C++ Version: 202002\n"
    "  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) "
    "64 architecture applications\n"
    "  - Intel(R) MKL-DNN v3.13.3 (Git Hash b38f97eb6f2173513112f15a0481750b8a66e901)\n"
    "  - OpenMP 201511 (a.k.a. OpenMP 4.5)\n"
    "  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, TORCH_VERSION=2.15.0, USE_MKL=ON\n";

CpuFeatures sapphire_rapids() {  // a cloud Xeon: AVX-512, AVX512-BF16, AMX
  CpuFeatures cpu;
  cpu.avx = cpu.fma = cpu.avx2 = true;
  cpu.avx512f = cpu.avx512dq = cpu.avx512bw = cpu.avx512vl = true;
  cpu.avx512_bf16 = cpu.amx_tile = cpu.amx_bf16 = true;
  return cpu;
}

TEST(CpuRuntime, TheWheelsConfigurationNamesMklAndItsBuiltInOneDnn) {
  const TorchCpuLibraries libraries = parse_torch_config(kWheelConfig);
  EXPECT_EQ(libraries.torch_version, "2.15.0");
  EXPECT_EQ(libraries.blas, "MKL 2024.2");
  EXPECT_EQ(libraries.onednn, "oneDNN 3.13.3");
  const TorchCpuLibraries openblas =
      parse_torch_config("  - Build settings: BLAS_INFO=open, TORCH_VERSION=2.14.0\n");
  EXPECT_EQ(openblas.blas, "open");
  EXPECT_EQ(openblas.onednn, "");
}

TEST(CpuRuntime, ASecondOneDnnOrOpenMpRuntimeBesideLibTorchsIsCounted) {
  const TorchCpuLibraries wheel = parse_torch_config(kWheelConfig);
  const std::string torch_lib = "/venv/lib/python3.11/site-packages/torch/lib/";
  const LoadedRuntimes alone =
      count_runtimes({torch_lib + "libtorch_cpu.so", torch_lib + "libgomp.so.1"}, wheel);
  EXPECT_EQ(alone.onednn, (std::vector<std::string>{"built into LibTorch"}));
  EXPECT_EQ(alone.openmp, (std::vector<std::string>{torch_lib + "libgomp.so.1"}));
  const LoadedRuntimes beside = count_runtimes(
      {torch_lib + "libtorch_cpu.so", torch_lib + "libgomp.so.1",
       "/usr/lib/x86_64-linux-gnu/libdnnl.so.2", "/usr/lib/x86_64-linux-gnu/libgomp.so.1",
       "/opt/intel/lib/libiomp5.so", "/usr/lib/x86_64-linux-gnu/libgomp-plugin-nvptx.so.1"},
      wheel);
  EXPECT_EQ(beside.onednn.size(), 2u) << join(beside.onednn, ", ");
  EXPECT_EQ(beside.openmp.size(), 3u) << join(beside.openmp, ", ");
}

// The process this test runs in links what kiln links (kiln_core): after products in fp32 (MKL)
// and bf16 (oneDNN), one oneDNN, LibTorch's own, and one OpenMP runtime are loaded.
TEST(CpuRuntime, ThisProcessHoldsOneOneDnnAndOneOpenMpRuntime) {
  const at::Tensor a = at::randn({64, 96}), b = at::randn({96, 32});
  ASSERT_TRUE(at::matmul(a, b).isfinite().all().item<bool>());
  ASSERT_TRUE(at::matmul(a.to(at::kBFloat16), b.to(at::kBFloat16)).isfinite().all().item<bool>());
  const TorchCpuLibraries libraries = parse_torch_config(at::show_config());
  const LoadedRuntimes runtimes = count_runtimes(loaded_objects(), libraries);
  EXPECT_EQ(runtimes.onednn.size(), 1u) << join(runtimes.onednn, ", ");
  EXPECT_EQ(runtimes.openmp.size(), 1u) << join(runtimes.openmp, ", ");
}

TEST(CpuRuntime, Bf16ProductsRunOnAmxUnlessOneDnnIsCappedBelowIt) {
  const CpuFeatures spr = sapphire_rapids();
  EXPECT_EQ(bf16_isa(spr, ""), "AMX");
  EXPECT_EQ(bf16_isa(spr, "AVX512_CORE_AMX"), "AMX");
  EXPECT_EQ(bf16_isa(spr, "avx10_1_512_amx"), "AMX");
  EXPECT_EQ(bf16_isa(spr, "AVX512_CORE_BF16"), "AVX512-BF16");
  EXPECT_EQ(bf16_isa(spr, "AVX2"), "");
  EXPECT_EQ(bf16_isa(spr, "SSE41"), "");
  CpuFeatures cooper_lake = spr;  // AVX512-BF16 without AMX
  cooper_lake.amx_tile = cooper_lake.amx_bf16 = false;
  EXPECT_EQ(bf16_isa(cooper_lake, ""), "AVX512-BF16");
  EXPECT_EQ(bf16_isa(CpuFeatures{}, ""), "");
}

TEST(CpuRuntime, TheLineNamesEachLibraryTheOpenMpRuntimeTheCpuAndTheMalloc) {
  CpuFeatures cpu = sapphire_rapids();
  cpu.model_name = "Intel(R) Xeon(R) Platinum 8480+";
  const TorchCpuLibraries wheel = parse_torch_config(kWheelConfig);
  const LoadedRuntimes runtimes{{"built into LibTorch"}, {"/t/lib/libgomp.so.1"}};
  EXPECT_EQ(cpu_runtime_line(wheel, runtimes, cpu, "", 2, "jemalloc 5.3.0"),
            "CPU products: MKL 2024.2 (fp32) and oneDNN 3.13.3 (bf16, bf32; on AMX), built into "
            "LibTorch 2.15.0; OpenMP libgomp.so.1, 2 threads; CPU: Intel(R) Xeon(R) Platinum "
            "8480+, avx2 fma avx512f avx512_bf16 amx_tile amx_bf16; malloc: jemalloc 5.3.0");
  EXPECT_NE(cpu_runtime_line(wheel, runtimes, CpuFeatures{}, "", 1, "glibc")
                .find("(bf16, bf32; bf16 emulated: LibTorch keeps such products), "),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
