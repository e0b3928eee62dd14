#include "core/util/allocation_meter.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

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

// The metered allocations' sizes, by address, so that the meter's DataPtrs stay "simple" (their
// context is their data) as LibTorch's CPU allocator's are: Allocator::raw_allocate() requires
// it, and LibTorch 1.13's oneDNN (ideep) allocates the scratch of its bf16 kernels that way
// (`kiln bench` in bf16 stopped at LibTorch's internal assert before this). Never destroyed:
// storages made through the meter may outlive every static.
std::mutex sizes_lock;
auto* const sizes = new std::unordered_map<void*, int64_t>();
c10::DeleterFnPtr inner_deleter = nullptr;  // the inner allocator's, which frees the data

void release(void* data) {
  int64_t bytes = 0;
  {
    const std::lock_guard<std::mutex> hold(sizes_lock);
    const auto found = sizes->find(data);
    if (found != sizes->end()) {
      bytes = found->second;
      sizes->erase(found);
    }
  }
  live_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  inner_deleter(data);
}

// LibTorch's CPU allocator, counted: every storage resized or freed anywhere (an fsdp shard's
// storage resized to 0, autograd dropping a saved activation) comes back through release().
class MeteredAllocator final : public c10::Allocator {
 public:
  explicit MeteredAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t bytes) override {
    c10::DataPtr inner = inner_->allocate(bytes);
    void* data = inner.get();
    const c10::Device device = inner.device();
    if (data == nullptr) return inner;  // zero bytes: nothing to count or free
    const auto counted = static_cast<int64_t>(bytes);
    {
      const std::lock_guard<std::mutex> hold(sizes_lock);
      (*sizes)[data] = counted;
    }
    raise_peak(live_bytes.fetch_add(counted, std::memory_order_relaxed) + counted);
    inner.release_context();  // freed by release() from now on
    return {data, data, &release, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

 private:
  c10::Allocator* inner_;
};

}  // namespace

void install_allocation_meter() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    c10::Allocator* cpu = c10::GetAllocator(c10::DeviceType::CPU);
    // LibTorch's CPU allocator is simple (its context is its data, freed by its raw deleter);
    // one that is not is left uncounted rather than freed wrongly.
    inner_deleter = cpu->raw_deleter();
    if (inner_deleter == nullptr) return;
    // Never destroyed: storages made through it may outlive every static.
    static auto* meter = new MeteredAllocator(cpu);
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
