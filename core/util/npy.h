// NumPy's .npy format (version 1.0), for arrays Kiln hands to Python: the magic "\x93NUMPY", the
// version, a little-endian header length, a Python dict literal ({'descr': '<f4', 'fortran_order':
// False, 'shape': (2, 3), }) padded with spaces to a multiple of 64 bytes with a final newline,
// then the data in C order. numpy.load reads it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// The bytes of a .npy file of float32 `values` with `shape` (their product is values.size()).
std::string npy_float32(const std::vector<int64_t>& shape, const float* values);

}  // namespace kiln
