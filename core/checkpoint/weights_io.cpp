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

std::map<std::string, at::Tensor> read_weights(const std::string& path) {
  SafetensorsFile file(path);
  std::map<std::string, at::Tensor> out;
  for (const auto& blob : file.tensors()) {
    auto it = std::find_if(dtype_names().begin(), dtype_names().end(),
                           [&](const auto& entry) { return entry.first == blob.dtype; });
    if (it == dtype_names().end()) {
      throw UserError(fmt::format("'{}': tensor '{}' has dtype {}, which Kiln cannot load", path,
                                  blob.name, blob.dtype));
    }
    auto tensor =
        at::from_blob(const_cast<void*>(blob.data), blob.shape, at::TensorOptions(it->second));
    const bool half = it->second == at::kHalf || it->second == at::kBFloat16;
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
    auto it = std::find_if(dtype_names().begin(), dtype_names().end(),
                           [&](const auto& entry) { return entry.second == t.scalar_type(); });
    if (it == dtype_names().end()) {
      throw std::logic_error("no safetensors dtype for tensor '" + name + "'");
    }
    blobs.push_back(TensorBlob{name, it->first, t.sizes().vec(), t.data_ptr(), t.nbytes()});
  }
  write_safetensors(path, blobs, metadata);
}

}  // namespace kiln
