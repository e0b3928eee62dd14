#include "core/util/allocation_meter.h"

#include <atomic>
#include <cstring>
#include <mutex>

#include <c10/core/Allocator.h>

#if KILN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "core/util/torch_compat.h"

namespace kiln {
namespace {

std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> peak_bytes{0};

void raise_peak(int64_t live) {
  int64_t peak = peak_bytes.load(std::memory_order_relaxed);
  while (live > peak && !peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

// What a metered allocation keeps until its tensor's storage lets it go: the inner allocator's
// pointer (freed by its own deleter when this is deleted) and the bytes to take off the count.
struct Allocation {
  c10::DataPtr inner;
  int64_t bytes;
};

void release(void* context) {
  auto* allocation = static_cast<Allocation*>(context);
  live_bytes.fetch_sub(allocation->bytes, std::memory_order_relaxed);
  delete allocation;
}

// LibTorch's CPU allocator, counted. Its DataPtr carries the Allocation as context, so a storage
// resized or freed anywhere (an fsdp shard's storage resized to 0, autograd dropping a saved
// activation) comes back through release().
class MeteredAllocator final : public c10::Allocator {
 public:
  explicit MeteredAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t bytes) KILN_ALLOCATE_CONST override {
    c10::DataPtr inner = inner_->allocate(bytes);
    void* data = inner.get();
    const c10::Device device = inner.device();
    const auto counted = static_cast<int64_t>(bytes);
    raise_peak(live_bytes.fetch_add(counted, std::memory_order_relaxed) + counted);
    return {data, new Allocation{std::move(inner), counted}, &release, device};
  }

#if KILN_TORCH_AT_LEAST(2, 3)
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
#endif

 private:
  c10::Allocator* inner_;
};

}  // namespace

void install_allocation_meter() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    // Never destroyed: storages made through it may outlive every static.
    static auto* meter = new MeteredAllocator(c10::GetAllocator(c10::DeviceType::CPU));
    // Priority above the default allocator's 0, so that nothing registered later at the default
    // priority takes the meter out again.
    c10::SetAllocator(c10::DeviceType::CPU, meter, /*priority=*/1);
  });
}

AllocationCounts allocation_counts(const c10::Device& device) {
#if KILN_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    // Entry 0 is StatType::AGGREGATE, all pools together (the enum moved namespace in 2.x).
    const auto& bytes = stats.allocated_bytes[0];
    return {bytes.current, bytes.peak};
  }
#endif
  (void)device;
  return {live_bytes.load(std::memory_order_relaxed), peak_bytes.load(std::memory_order_relaxed)};
}

void reset_allocation_peak(const c10::Device& device) {
#if KILN_WITH_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
    return;
  }
#endif
  (void)device;
  peak_bytes.store(live_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace kiln
