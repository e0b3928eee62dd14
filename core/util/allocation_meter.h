// The bytes a process's tensors hold, measured where they are allocated rather than tallied from
// the tensors Kiln knows of: on the CPU a meter installed in front of LibTorch's CPU allocator
// (c10::SetAllocator) counts every allocation and every free; on CUDA the caching allocator's own
// statistics (allocated bytes, not its reserved cache). A buffer a strategy forgets to free, a
// gradient that lingers or a bucket kept past its use is counted, whoever holds it.
//
// `kiln bench` installs the meter before it assembles the run and prints each rank's bytes live
// between steps and its peak within a step (core/app/speed/measure.cpp). Tensors made before the
// meter was installed are not counted, nor memory that is not a tensor's (BLAS workspaces,
// Gloo's transport buffers, the allocator's own bookkeeping).
#pragma once

#include <cstdint>

#include <c10/core/Device.h>

namespace kiln {

struct AllocationCounts {
  int64_t live = 0;  // bytes allocated and not freed, now
  int64_t peak = 0;  // the most that were live at once since the last reset_allocation_peak
};

// Puts the meter in front of LibTorch's CPU allocator; once per process, later calls do nothing.
void install_allocation_meter();

// The counts of `device`: the meter's for the CPU (zero until it is installed), the caching
// allocator's for a CUDA device.
AllocationCounts allocation_counts(const c10::Device& device);

// Starts a new peak at what is live now.
void reset_allocation_peak(const c10::Device& device);

}  // namespace kiln
