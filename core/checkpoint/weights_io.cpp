#include "core/checkpoint/weights_io.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/checkpoint/safetensors.h"
#include "core/util/error.h"

namespace kiln {

namespace {

const std::vector<std::pair<std::string, at::ScalarType>>& dtype_names() {
  static const std::vector<std::pair<std::string, at::ScalarType>> names = {
      {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"F64", at::kDouble},
      {"I64", at::kLong},  {"I32", at::kInt},  {"I16", at::kShort},     {"I8", at::kChar},
      {"U8", at::kByte},   {"BOOL", at::kBool}};
  return names;
}

}  // namespace

std::string safetensors_dtype(at::ScalarType type) {
  auto it = std::find_if(dtype_names().begin(), dtype_names().end(),
                         [&](const auto& entry) { return entry.second == type; });
  if (it == dtype_names().end()) {
    throw UserError(
        fmt::format("a tensor of dtype {} cannot be written as safetensors: keep "
                    "weights and state in a float or integer dtype",
                    c10::toString(type)));
  }
  return it->first;
}

at::ScalarType dtype_of_safetensors(const std::string& name) {
  auto it = std::find_if(dtype_names().begin(), dtype_names().end(),
                         [&](const auto& entry) { return entry.first == name; });
  if (it == dtype_names().end()) {
    throw UserError(fmt::format("dtype {} is not one Kiln loads", name));
  }
  return it->second;
}

std::map<std::string, at::Tensor> read_weights(const std::string& path) {
  SafetensorsFile file(path);
  std::map<std::string, at::Tensor> out;
  for (const auto& blob : file.tensors()) {
    at::ScalarType type;
    try {
      type = dtype_of_safetensors(blob.dtype);
    } catch (const UserError&) {
      throw UserError(fmt::format("'{}': tensor '{}' has dtype {}, which Kiln cannot load", path,
                                  blob.name, blob.dtype));
    }
    auto tensor = at::from_blob(const_cast<void*>(blob.data), blob.shape, at::TensorOptions(type));
    const bool half = type == at::kHalf || type == at::kBFloat16;
    out[blob.name] = half ? tensor.to(at::kFloat) : tensor.clone();
  }
  return out;
}

void write_weights(const std::string& path,
                   const std::vector<std::pair<std::string, at::Tensor>>& weights,
                   const std::map<std::string, std::string>& metadata) {
  std::vector<at::Tensor> keep_alive;  // CPU, contiguous copies the blobs point into
  std::vector<TensorBlob> blobs;
  for (const auto& [name, tensor] : weights) {
    keep_alive.push_back(tensor.detach().to(at::kCPU).contiguous());
    const at::Tensor& t = keep_alive.back();
    blobs.push_back(TensorBlob{name, safetensors_dtype(t.scalar_type()), t.sizes().vec(),
                               t.data_ptr(), t.nbytes()});
  }
  write_safetensors(path, blobs, metadata);
}

}  // namespace kiln
