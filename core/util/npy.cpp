#include "core/util/npy.h"

#include <cstring>

namespace kiln {

std::string npy_float32(const std::vector<int64_t>& shape, const float* values) {
  std::string dims;
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += (i ? ", " : "") + std::to_string(shape[i]);
    count *= shape[i];
  }
  if (shape.size() == 1) dims += ',';  // Python's one-element tuple: (6,)
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = 10 + header.size() + 1;  // magic, version, length; the newline
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  const size_t at = out.size();
  out.resize(at + bytes);
  std::memcpy(out.data() + at, values, bytes);  // little-endian, as every machine Kiln runs on
  return out;
}

}  // namespace kiln
