// oneDNN's matmul primitive (core/util/onednn_matmul.h) with its instruction set pinned, as
// ONEDNN_MAX_CPU_ISA pins it: AMX, AVX512-BF16, AVX-512 and AVX2, each where the CPU has it. Every
// product is checked against the double-precision product of the operands it multiplies (rounded
// to bf16 for bf16) within the error bound of fp32 sums, at shapes no vector width divides, plain
// and transposed; bf32 against the fp32 operands' product within bf16 rounding's bound. A pin
// holds for a whole process and only before oneDNN's first kernel: ctest runs each test alone,
// and a test that finds oneDNN already running in its process says SKIP.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/util/onednn_matmul.h"

namespace kiln {
namespace {

float round_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;  // to nearest even
  float rounded;
  std::memcpy(&rounded, &bits, sizeof rounded);
  return rounded;
}

uint16_t bf16_bits(float rounded) {
  uint32_t bits;
  std::memcpy(&bits, &rounded, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);
}

// Element (i, j) of op(X) for a row-major X stored [rows, cols], or [cols, rows] transposed.
double at(const std::vector<float>& x, bool transposed, int64_t rows, int64_t cols, int64_t i,
          int64_t j) {
  (void)rows;
  return transposed ? x[static_cast<size_t>(j * rows + i)] : x[static_cast<size_t>(i * cols + j)];
}

std::string fmt_shape(const MatmulShape& s) {
  return fmt::format("{} [{}, {}] x [{}, {}]{}{}", matmul_math_name(s.math), s.m, s.k, s.k, s.n,
                     s.trans_a ? ", A transposed" : "", s.trans_b ? ", B transposed" : "");
}

struct Checked {
  double worst_excess = 0;    // the largest |c - exact| / bound; <= 1 passes
  double largest_change = 0;  // the largest |c - the fp32 operands' exact product|
};

// c against the exact product of `a` and `b` (what oneDNN multiplies), within `relative` of
// sum |a_il b_lj| per element; and how far c is from the product of the unrounded operands.
Checked check(const MatmulShape& s, const std::vector<float>& a, const std::vector<float>& b,
              const std::vector<float>& a_fp32, const std::vector<float>& b_fp32,
              const std::vector<float>& c, double relative) {
  Checked out;
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      double exact = 0, magnitude = 0, unrounded = 0;
      for (int64_t l = 0; l < s.k; ++l) {
        const double x = at(a, s.trans_a, s.m, s.k, i, l), y = at(b, s.trans_b, s.k, s.n, l, j);
        exact += x * y;
        magnitude += std::abs(x * y);
        unrounded += at(a_fp32, s.trans_a, s.m, s.k, i, l) * at(b_fp32, s.trans_b, s.k, s.n, l, j);
      }
      const double got = c[static_cast<size_t>(i * s.n + j)];
      out.worst_excess =
          std::max(out.worst_excess, std::abs(got - exact) / (relative * magnitude + 1e-30));
      out.largest_change = std::max(out.largest_change, std::abs(got - unrounded));
    }
  }
  return out;
}

// Pins oneDNN to `pin` and checks every product there; SKIPs where that cannot be done.
void expect_exact_products_under(const std::string& pin) {
  if (!onednn_matmul_built()) {
    GTEST_SKIP() << "SKIP: this build has no oneDNN matmul (no libdnnl-dev of LibTorch's oneDNN)";
  }
  if (!pin_onednn_cpu_isa(pin)) {
    GTEST_SKIP() << "SKIP: oneDNN already runs in this process, so its ISA cannot be pinned to "
                 << pin << ": run this test alone (ctest does)";
  }
  std::string lower = pin;
  for (char& ch : lower)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (onednn_cpu_isa() != lower) {
    GTEST_SKIP() << "SKIP: this CPU lacks " << pin << " (oneDNN runs " << onednn_cpu_isa()
                 << " under that pin)";
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1, 1);
  // fp32 sums of k products: each product exact in fp32 or rounded once, then k additions; the
  // classic bound is k * 2^-24 of sum |a b| (doubled for the product's rounding and margin).
  const double fp32_sum = std::ldexp(1.0, -24);
  for (const auto& [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {5, 7, 13}, {37, 129, 64}, {64, 33, 300}}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (MatmulMath math : {MatmulMath::fp32, MatmulMath::bf16, MatmulMath::bf32}) {
          const MatmulShape s{trans_a, trans_b, m, n, k, math};
          SCOPED_TRACE(fmt_shape(s));
          std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
          for (float& x : a)
            x = uniform(rng);
          for (float& x : b)
            x = uniform(rng);
          std::vector<float> c(static_cast<size_t>(m * n), NAN);
          if (math == MatmulMath::bf16 && lower == "avx2") {
            // oneDNN multiplies bf16 from AVX-512 up: below, a clear refusal.
            EXPECT_THROW(onednn_matmul_implementation(s), std::runtime_error);
            continue;
          }
          const double sums = 2.0 * static_cast<double>(k) * fp32_sum;
          if (math == MatmulMath::bf16) {
            std::vector<float> a16 = a, b16 = b;
            for (float& x : a16)
              x = round_to_bf16(x);
            for (float& x : b16)
              x = round_to_bf16(x);
            std::vector<uint16_t> a_bits(a.size()), b_bits(b.size());
            std::transform(a16.begin(), a16.end(), a_bits.begin(), bf16_bits);
            std::transform(b16.begin(), b16.end(), b_bits.begin(), bf16_bits);
            onednn_matmul(s, a_bits.data(), b_bits.data(), c.data());
            const Checked got = check(s, a16, b16, a, b, c, sums);
            EXPECT_LE(got.worst_excess, 1.0);
            // The operands were rounded: the result is not the fp32 operands' product.
            if (k > 1) {
              EXPECT_GT(got.largest_change, 1e-4);
            }
          } else {
            onednn_matmul(s, a.data(), b.data(), c.data());
            // bf32 may round each operand to bf16 (2^-9 relative, to nearest) before an exact
            // product: within 2 * 2^-9 + 2^-18 of sum |a b| on top of the sums' error.
            const double rounding = math == MatmulMath::bf32 ? std::ldexp(1.0, -8) + 1e-5 : 0;
            EXPECT_LE(check(s, a, b, a, b, c, sums + rounding).worst_excess, 1.0);
          }
          const std::string implementation = onednn_matmul_implementation(s);
          // A kernel of a wider instruction set than the pin would mean the pin did not hold.
          if (lower != "avx512_core_amx") {
            EXPECT_EQ(implementation.find("amx"), std::string::npos) << implementation;
          }
          if (lower == "avx512_core_amx" && math == MatmulMath::bf16) {
            EXPECT_NE(implementation.find("amx"), std::string::npos) << implementation;
          }
        }
      }
    }
  }
}

TEST(OnednnMatmulPinned, Amx) {
  expect_exact_products_under("AVX512_CORE_AMX");
}
TEST(OnednnMatmulPinned, Avx512Bf16) {
  expect_exact_products_under("AVX512_CORE_BF16");
}
TEST(OnednnMatmulPinned, Avx512) {
  expect_exact_products_under("AVX512_CORE");
}
TEST(OnednnMatmulPinned, Avx2) {
  expect_exact_products_under("AVX2");
}

// Where the linear layers' products go, on the ISA oneDNN runs unpinned: bf32 has only the
// primitive; bf16 takes it on AMX, where the BLAS-like bf16 GEMM cannot reach the tiles.
TEST(OnednnMatmul, ThePrimitiveServesBf32AlwaysAndBf16OnAmx) {
  if (!onednn_matmul_built()) {
    GTEST_SKIP() << "SKIP: this build has no oneDNN matmul (no libdnnl-dev of LibTorch's oneDNN)";
  }
  EXPECT_TRUE(onednn_matmul_preferred(MatmulMath::bf32));
  const bool amx = onednn_cpu_isa().find("amx") != std::string::npos;
  EXPECT_EQ(onednn_matmul_preferred(MatmulMath::bf16), amx);
  EXPECT_EQ(onednn_bf32_rounds(), amx);
  EXPECT_FALSE(onednn_matmul_preferred(MatmulMath::fp32));
}

TEST(OnednnMatmul, AnUnknownIsaNameIsRefused) {
  EXPECT_FALSE(pin_onednn_cpu_isa("AVX1024_FUTURE"));
}

}  // namespace
}  // namespace kiln
