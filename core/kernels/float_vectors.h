// Eight floats at a time for Kiln's own CPU kernels (core/kernels/fused_*.cpp), with the
// instructions of the CPU the program runs on: a function marked KILN_ISA_CLONES is compiled
// twice, for x86-64-v3 (AVX2, FMA) and for the baseline, and the loader picks one.
// GCC/Clang vector types rather than ATen's Vectorized<float>: outside ATen's own
// per-instruction-set builds, Vectorized is its generic form (loops over an array, exp by
// std::exp), while these compile to whatever each clone targets.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kiln::simd {

using Floats = float __attribute__((vector_size(32)));
using Ints = int32_t __attribute__((vector_size(32)));
constexpr int64_t kLanes = 8;

#if defined(__GNUC__) && defined(__x86_64__)
#define KILN_ISA_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define KILN_ISA_CLONES
#endif
// The helpers below are inlined into each clone, so that they too use its instructions; never
// called, so GCC's warning that 32-byte vectors pass differently with and without AVX concerns no
// call here.
#define KILN_INLINE inline __attribute__((always_inline))
#pragma GCC diagnostic ignored "-Wpsabi"

KILN_INLINE Floats splat(float x) {
  return Floats{x, x, x, x, x, x, x, x};
}
KILN_INLINE Floats load(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
KILN_INLINE void store(float* p, const Floats& v) {
  std::memcpy(p, &v, sizeof v);
}
KILN_INLINE float sum_lanes(const Floats& v) {
  float s = 0;
  for (int64_t i = 0; i < kLanes; ++i)
    s += v[i];
  return s;
}

KILN_INLINE float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i)
    s += a[i] * b[i];
  return s;
}

KILN_INLINE float max_of(const float* row, int64_t n) {
  float max = row[0];
  int64_t j = 0;
  if (n >= kLanes) {
    Floats lanes = load(row);
    for (j = kLanes; j + kLanes <= n; j += kLanes) {
      const Floats x = load(row + j);
      lanes = x > lanes ? x : lanes;
    }
    for (int64_t i = 0; i < kLanes; ++i)
      max = std::max(max, lanes[i]);
  }
  for (; j < n; ++j)
    max = std::max(max, row[j]);
  return max;
}

// e^x for x <= 0 to within about 2 ulp (Cephes' expf): x = n ln 2 + r with |r| <= ln(2) / 2,
// e^r by its degree-6 polynomial, 2^n built in the exponent bits. Inputs below -87 give
// e^-87 ~ 1.6e-38 rather than a subnormal, negligible beside a softmax row's sum of at least 1.
KILN_INLINE Floats exp_nonpositive(const Floats& unclamped) {
  const Floats x = unclamped < splat(-87.0f) ? splat(-87.0f) : unclamped;
  const Floats round = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const Floats n = (x * splat(1.44269504088896341f) + round) - round;
  const Floats r = (x - n * splat(0.693359375f)) - n * splat(-2.12194440e-4f);
  Floats p = splat(1.9875691500e-4f);
  p = p * r + splat(1.3981999507e-3f);
  p = p * r + splat(8.3334519073e-3f);
  p = p * r + splat(4.1665795894e-2f);
  p = p * r + splat(1.6666665459e-1f);
  p = p * r + splat(5.0000001201e-1f);
  p = p * r * r + r + splat(1.0f);
  const Ints exponent = (__builtin_convertvector(n, Ints) + 127) << 23;
  Floats two_to_n;
  std::memcpy(&two_to_n, &exponent, sizeof two_to_n);
  return p * two_to_n;
}

// row[j] = e^(row[j] - shift) for j < n; returns their sum.
KILN_INLINE float exp_shifted(float* row, int64_t n, float shift) {
  const Floats s = splat(shift);
  Floats sums = splat(0);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    const Floats e = exp_nonpositive(load(row + j) - s);
    store(row + j, e);
    sums += e;
  }
  float total = sum_lanes(sums);
  if (j < n) {
    float tail[kLanes];
    std::fill(tail, tail + kLanes, shift);  // lanes past the row: e^0, unused
    std::memcpy(tail, row + j, sizeof(float) * (n - j));
    store(tail, exp_nonpositive(load(tail) - s));
    for (int64_t i = 0; j + i < n; ++i) {
      row[j + i] = tail[i];
      total += tail[i];
    }
  }
  return total;
}

}  // namespace kiln::simd
