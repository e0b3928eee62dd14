// Rotary position embeddings (RoPE) as Hugging Face's Llama computes them: each head's first
// half of dimensions turned against its second half (rotate_half), by angles position x inverse
// frequency, with Llama 3's frequency scaling as an option. Models rotate queries and keys with
// these before attention.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace kiln {

struct RotaryOptions {
  int64_t head_dim = 0;  // even
  double theta = 10000.0;
  // Llama 3's scaling of the frequencies; factor 0 = none.
  double factor = 0.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_context = 8192;  // the context the frequencies were trained for
};

// The inverse frequencies theta^(-2i/d), i < d/2, in float32 as HF computes them. With scaling:
// wavelengths longer than original_context / low_freq_factor are divided by the factor, those
// shorter than original_context / high_freq_factor kept, and those between interpolated.
at::Tensor rotary_inverse_frequencies(const RotaryOptions& options);

// The rotation angles of positions 0 .. time - 1: [time, head_dim / 2], position (as float) x
// inverse frequency, in inv_freq's type. apply_rotary's, and the fused attention kernel's table.
at::Tensor rotary_angles(int64_t time, const at::Tensor& inv_freq);

// x [batch, heads, time, head_dim] rotated by position: x cos + rotate_half(x) sin, where
// rotate_half(x) = [-x2, x1] for x's halves x1, x2; `inv_freq` [head_dim / 2]. `positions`:
// int64 [batch, time] for packed rows (core/layers/document_positions.h); undefined = 0 .. time
// - 1.
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& inv_freq,
                        const at::Tensor& positions = {});

}  // namespace kiln
