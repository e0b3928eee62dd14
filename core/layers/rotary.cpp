#include "core/layers/rotary.h"

#include <cmath>

#include <ATen/ATen.h>

namespace kiln {

at::Tensor rotary_inverse_frequencies(const RotaryOptions& o) {
  const int64_t d = o.head_dim;
  auto inv = 1.0 / at::pow(o.theta,
                           at::arange(0, d, 2, at::kLong).to(at::kFloat) / static_cast<double>(d));
  if (o.factor <= 0) return inv;
  const double context = static_cast<double>(o.original_context);
  const double low_wavelen = context / o.low_freq_factor,
               high_wavelen = context / o.high_freq_factor;
  auto wavelen = 2 * M_PI / inv;
  auto scaled = at::where(wavelen > low_wavelen, inv / o.factor, inv);
  auto smooth = (context / wavelen - o.low_freq_factor) / (o.high_freq_factor - o.low_freq_factor);
  auto smoothed = (1 - smooth) * scaled / o.factor + smooth * scaled;
  auto medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
  return at::where(medium, smoothed, scaled);
}

at::Tensor rotary_angles(int64_t time, const at::Tensor& inv_freq) {
  return at::outer(at::arange(time, inv_freq.options()), inv_freq);
}

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& inv_freq,
                        const at::Tensor& positions) {
  const int64_t t = x.size(2), half = x.size(3) / 2;
  // [t, d / 2], or [batch, 1, t, d / 2] for packed rows (one angle table per row, over its heads)
  auto freqs = positions.defined()
                   ? (positions.to(inv_freq.scalar_type()).unsqueeze(-1) * inv_freq).unsqueeze(1)
                   : rotary_angles(t, inv_freq);
  auto angles = at::cat({freqs, freqs}, -1);
  auto cos = angles.cos().to(x.scalar_type()), sin = angles.sin().to(x.scalar_type());
  auto rotated = at::cat({-x.narrow(3, half, half), x.narrow(3, 0, half)}, -1);
  return x * cos + rotated * sin;
}

}  // namespace kiln
