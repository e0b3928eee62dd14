#include "core/layers/random_draws.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>

#include "core/util/counter_hash.h"

namespace kiln {
namespace {

// SplitMix64's increment (2^64 / phi, odd) and finaliser constants, as core/util/counter_hash.h
// has them, for the tensor form below.
constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kMix1 = 0xBF58476D1CE4E5B9ull;
constexpr uint64_t kMix2 = 0x94D049BB133111EBull;
constexpr int kKeptBits = 24;  // a draw's top bits compared with p: p's resolution is 2^-24

thread_local std::optional<DrawKey> current_key;

// x seen as [rows, outer, mid, inner], its elements numbered as those of [rows, outer, whole,
// inner] with x's mid entries at [start, start + mid) of the whole: for a whole x, mid = 1 and
// inner = the elements of a row.
struct Layout {
  int64_t rows = 1, outer = 1, mid = 1, inner = 1, start = 0, whole = 1;
};

Layout layout_of(const at::Tensor& x, const SliceOf& slice) {
  if (x.dim() < 1 || x.size(0) < 1) throw std::invalid_argument("dropout of a tensor without rows");
  Layout l;
  l.rows = x.size(0);
  if (slice.dim < 0) {
    l.inner = x.numel() / l.rows;
    return l;
  }
  if (slice.dim == 0 || slice.dim >= x.dim() || slice.start < 0 ||
      slice.start + x.size(slice.dim) > slice.whole)
    throw std::invalid_argument("dropout: a slice that does not fit its whole tensor");
  for (int64_t d = 1; d < slice.dim; ++d)
    l.outer *= x.size(d);
  for (int64_t d = slice.dim + 1; d < x.dim(); ++d)
    l.inner *= x.size(d);
  l.mid = x.size(slice.dim);
  l.start = slice.start;
  l.whole = slice.whole;
  return l;
}

uint64_t threshold(double p) {
  if (!(p >= 0 && p < 1)) throw std::invalid_argument("dropout probability outside [0, 1)");
  return static_cast<uint64_t>(std::llround(std::ldexp(p, kKeptBits)));
}

// Each row's sample key under the key in force (or a fresh one from LibTorch's generator).
std::vector<uint64_t> sample_keys(int64_t rows, int64_t site) {
  DrawKey key;
  if (current_key) {
    key = *current_key;
  } else {
    key.seed = static_cast<uint64_t>(
        at::randint(std::numeric_limits<int64_t>::max(), {1}, at::kLong).item<int64_t>());
  }
  const uint64_t site_key = splitmix64_output(
      splitmix64_output(key.seed, static_cast<uint64_t>(key.step)), static_cast<uint64_t>(site));
  std::vector<uint64_t> keys(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    keys[static_cast<size_t>(i)] =
        splitmix64_output(site_key, static_cast<uint64_t>(key.first_sample + i));
  }
  return keys;
}

// SplitMix64's finaliser over int64 tensors: multiplication wraps as uint64's does, and a right
// shift is arithmetic, so its sign-extended bits are masked off.
at::Tensor shifted_right(const at::Tensor& z, int bits) {
  return z.__rshift__(bits).bitwise_and((int64_t{1} << (64 - bits)) - 1);
}

at::Tensor mix(at::Tensor z) {
  z = z.bitwise_xor(shifted_right(z, 30)).mul(static_cast<int64_t>(kMix1));
  z = z.bitwise_xor(shifted_right(z, 27)).mul(static_cast<int64_t>(kMix2));
  return z.bitwise_xor(shifted_right(z, 31));
}

// A reduced-precision x gets an fp32 mask: its 1 / (1 - p) is then exact to fp32's precision.
at::ScalarType mask_dtype(const at::Tensor& x) {
  const at::ScalarType type = x.scalar_type();
  return type == at::kBFloat16 || type == at::kHalf ? at::kFloat : type;
}

}  // namespace

DrawScope::DrawScope(std::optional<DrawKey> key) : previous_(current_key) {
  current_key = key;
}

DrawScope::~DrawScope() {
  current_key = previous_;
}

std::optional<DrawKey> current_draws() {
  return current_key;
}

at::Tensor dropout_mask(const at::Tensor& x, double p, int64_t site, const SliceOf& slice) {
  if (!x.device().is_cpu()) return dropout_mask_by_tensor_ops(x, p, site, slice);
  const Layout l = layout_of(x, slice);
  const uint64_t dropped_below = threshold(p);
  const std::vector<uint64_t> keys = sample_keys(l.rows, site);
  at::Tensor mask = at::empty(
      x.sizes(), x.options().dtype(mask_dtype(x)).memory_format(at::MemoryFormat::Contiguous));
  const int64_t lines = l.rows * l.outer * l.mid;  // runs of `inner` consecutive elements
  const int64_t grain = std::max<int64_t>(1, 32768 / l.inner);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, mask.scalar_type(), "dropout_mask", [&] {
        scalar_t* out = mask.data_ptr<scalar_t>();
        const auto kept = static_cast<scalar_t>(1.0 / (1.0 - p));
        const auto dropped = static_cast<scalar_t>(0);
        at::parallel_for(0, lines, grain, [&](int64_t begin, int64_t end) {
          for (int64_t line = begin; line < end; ++line) {
            const int64_t row = line / (l.outer * l.mid), o = line / l.mid % l.outer,
                          m = line % l.mid;
            const auto first = static_cast<uint64_t>(((o * l.whole) + l.start + m) * l.inner);
            // splitmix64_output(key, first + i), one addition per element.
            uint64_t state = keys[static_cast<size_t>(row)] + first * kGamma;
            scalar_t* dst = out + line * l.inner;
            for (int64_t i = 0; i < l.inner; ++i, state += kGamma)
              dst[i] = (splitmix64(state) >> (64 - kKeptBits)) >= dropped_below ? kept : dropped;
          }
        });
      });
  return mask;
}

at::Tensor dropout_mask_by_tensor_ops(const at::Tensor& x, double p, int64_t site,
                                      const SliceOf& slice) {
  const Layout l = layout_of(x, slice);
  const auto dropped_below = static_cast<int64_t>(threshold(p));
  std::vector<int64_t> keys;
  for (uint64_t key : sample_keys(l.rows, site))
    keys.push_back(static_cast<int64_t>(key));
  const auto on = at::TensorOptions().dtype(at::kLong).device(x.device());
  at::Tensor index = (at::arange(l.outer, on).view({1, l.outer, 1, 1}) * l.whole +
                      at::arange(l.start, l.start + l.mid, on).view({1, 1, l.mid, 1})) *
                         l.inner +
                     at::arange(l.inner, on).view({1, 1, 1, l.inner});
  at::Tensor state = at::tensor(keys, at::kLong).to(x.device()).view({l.rows, 1, 1, 1}) +
                     (index + 1).mul(static_cast<int64_t>(kGamma));
  at::Tensor keep = shifted_right(mix(state), 64 - kKeptBits).ge(dropped_below);
  return (keep.to(mask_dtype(x)) * (1.0 / (1.0 - p))).view(x.sizes());
}

}  // namespace kiln
