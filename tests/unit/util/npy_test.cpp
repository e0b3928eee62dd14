// The .npy bytes Kiln writes, against the layout numpy.save writes for the same float32 array
// (format 1.0: the data starts at byte 128 for a small shape; numpy.load reads them back in the
// interop tests).
#include "core/util/npy.h"

#include <gtest/gtest.h>

#include <cstring>

namespace kiln {
namespace {

TEST(Npy, WritesNumpysHeaderAndTheDataAfterIt) {
  const float values[6] = {1, 2, 3, 4, 5, -0.5f};
  const std::string bytes = npy_float32({2, 3}, values);
  ASSERT_EQ(bytes.size(), 128u + sizeof values);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<unsigned char>(bytes[8]) + 256 * static_cast<unsigned char>(bytes[9]), 118);
  EXPECT_EQ(bytes.substr(10, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(bytes[127], '\n');
  EXPECT_EQ(std::memcmp(bytes.data() + 128, values, sizeof values), 0);
  EXPECT_NE(npy_float32({6}, values).find("'shape': (6,), }"), std::string::npos);
}

}  // namespace
}  // namespace kiln
