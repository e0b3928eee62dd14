// Frozen linear weights kept in int8 (adapter.base_dtype = "int8"): weight-only, symmetric, one
// scale per output channel. Row i is stored as q_i = round(w_i / s_i), clamped to [-127, 127],
// with s_i = max_j |w_ij| / 127 (1 for a row of zeros), so every element of q_i s_i is within
// s_i / 2 of the original: a quarter of fp32's bytes, and the error bound the tests check.
//
// The int8 tensor stays the model's parameter (the same TensorImpl, by which linear() and an
// adapter's low-rank sites find it); its scales are kept here, registered by the weight as the
// sites are. linear() (core/layers/linear.h) dequantizes such a weight, q s in fp32, for each
// product: a transient the size of one layer's weight, not the whole model.
#pragma once

#include <memory>

#include <ATen/core/Tensor.h>

namespace kiln {

struct Int8Rows {
  at::Tensor values;  // int8, the weight's shape
  at::Tensor scales;  // fp32 [rows]
};
// `weight` (floating, 2-D) quantized row by row as above.
Int8Rows quantize_rows(const at::Tensor& weight);

// Registers `scales` for the int8 `weight` until the returned handle is destroyed.
std::shared_ptr<void> register_int8_scales(const at::Tensor& weight, at::Tensor scales);
// The scales registered for `weight`, or an undefined tensor.
at::Tensor int8_scales(const at::Tensor& weight);
// Replaces the scales of a registered weight whose rows were cut (tensor parallelism).
void set_int8_scales(const at::Tensor& weight, at::Tensor scales);
// The registered int8 `weight` as fp32 on its device: values times their row's scale.
at::Tensor dequantized(const at::Tensor& weight);

}  // namespace kiln
