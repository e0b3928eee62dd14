// The allocation meter counts what LibTorch's CPU allocator hands out and takes back: a tensor of
// a size the test chooses moves the live count by exactly its bytes, freeing it moves it back, and
// the peak remembers the most live at once until it is reset.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/util/allocation_meter.h"

namespace kiln {
namespace {

const c10::Device kCpu(c10::DeviceType::CPU);

TEST(AllocationMeter, CountsEveryByteOfATensorUntilItIsFreed) {
  install_allocation_meter();
  install_allocation_meter();  // a second call changes nothing
  const int64_t before = allocation_counts(kCpu).live;
  reset_allocation_peak(kCpu);
  {
    at::Tensor a = at::empty({1000}, at::kFloat);     // 4000 bytes
    at::Tensor b = at::empty({250, 4}, at::kDouble);  // 8000 bytes
    EXPECT_EQ(allocation_counts(kCpu).live - before, 12000);
    a = at::Tensor();
    EXPECT_EQ(allocation_counts(kCpu).live - before, 8000);
  }
  const AllocationCounts after = allocation_counts(kCpu);
  EXPECT_EQ(after.live, before);
  EXPECT_EQ(after.peak - before, 12000);
  reset_allocation_peak(kCpu);
  EXPECT_EQ(allocation_counts(kCpu).peak, before);
}

// A storage resized in place (as fsdp frees a gathered parameter) is counted at its new size.
TEST(AllocationMeter, AStorageResizedToNothingIsCountedAsFreed) {
  install_allocation_meter();
  const int64_t before = allocation_counts(kCpu).live;
  at::Tensor t = at::zeros({4096}, at::kFloat);
  EXPECT_EQ(allocation_counts(kCpu).live - before, 4096 * 4);
  t.storage().unsafeGetStorageImpl()->reset();
  EXPECT_EQ(allocation_counts(kCpu).live, before);
}

}  // namespace
}  // namespace kiln
