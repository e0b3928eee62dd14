// Model weights in and out of safetensors files (core/checkpoint/safetensors.h), as LibTorch
// tensors.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace kiln {

// Every tensor of the file, copied out of the map (so the file may go away afterwards). 16-bit
// floats (F16, BF16: how checkpoints on the Hub are often stored) come back as fp32, the
// precision Kiln keeps its weights in; every other dtype as it is.
// The safetensors name of a dtype (F32, BF16, ...), and back; a UserError for one the format
// (or Kiln) does not have.
std::string safetensors_dtype(at::ScalarType type);
at::ScalarType dtype_of_safetensors(const std::string& name);

std::map<std::string, at::Tensor> read_weights(const std::string& path);

void write_weights(const std::string& path,
                   const std::vector<std::pair<std::string, at::Tensor>>& weights,
                   const std::map<std::string, std::string>& metadata);

}  // namespace kiln
