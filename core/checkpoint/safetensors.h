// The safetensors format (Hugging Face): 8 bytes of little-endian header length, a JSON header
// {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the raw little-endian tensor bytes. Plain data, so loading one can never run code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/util/mapped_file.h"

namespace kiln {

struct TensorBlob {
  std::string name;
  std::string dtype;  // F32, F16, BF16, F64, I64, ...
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

// The file's first bytes: the header's length and the header, padded so the data starts 8-byte
// aligned; the tensors' bytes follow in the order given, as write_safetensors writes them.
std::string safetensors_header(const std::vector<TensorBlob>& tensors,
                               const std::map<std::string, std::string>& metadata);

void write_safetensors(const std::string& path, const std::vector<TensorBlob>& tensors,
                       const std::map<std::string, std::string>& metadata);

// A safetensors file, memory-mapped; the blobs point into the map and live as long as this.
class SafetensorsFile {
 public:
  // Checks the header and every tensor's extent; a UserError naming the problem otherwise.
  explicit SafetensorsFile(const std::string& path);
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::vector<TensorBlob>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  void parse(const std::string& path);

  MappedFile map_;
  std::vector<TensorBlob> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace kiln
