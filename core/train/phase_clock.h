// Splits a training step's wall time into phases (data, forward, backward, communication,
// optimizer) for `kiln bench`: the trainer calls lap(slot) at each phase's end. Off during
// training: measuring on a GPU means waiting for the device at every phase boundary, which costs
// the overlap it measures.
#pragma once

#include <chrono>

#include <torch/cuda.h>
#include <torch/types.h>

namespace kiln {

class PhaseClock {
 public:
  PhaseClock(bool enabled, const torch::Device& device)
      : enabled_(enabled), device_(device), last_(std::chrono::steady_clock::now()) {}

  void lap(double& slot_ms) {
    if (!enabled_) return;
    // The run's device by index: synchronize() without one waits on the current device only.
    if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
    const auto now = std::chrono::steady_clock::now();
    slot_ms += std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
  }

 private:
  bool enabled_;
  torch::Device device_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace kiln
