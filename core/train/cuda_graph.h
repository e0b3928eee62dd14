// train.cuda_graphs: a training micro-step (forward, loss, backward) captured once as a CUDA
// graph and replayed for every micro-step after, so that the GPU gets one launch instead of the
// hundreds of small kernels of a small model's step, each of which costs the host microseconds.
//
// What is captured and what is not:
//   - Captured: forward under the precision policy's autocast, the loss, backward into gradients
//     that stay allocated (zeroed in place each step, never freed: the graph writes into them).
//   - Eager: the gradient norm and clipping, the update. LibTorch's C++ Adam and AdamW keep the
//     step count on the host and compute their bias correction from it, so a captured update
//     would replay step 1's correction forever; PyTorch's "capturable" optimizers have no C++
//     counterpart.
//   - Refused (one line each, at assembly): a device other than CUDA, a Kiln built without CUDA,
//     parallel strategies whose step talks to other ranks, and fp16's loss scaling (its scale is
//     a host number that changes between steps), and dropout (its masks are keyed by the step,
//     a host number too: core/layers/random_draws.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/train/assemble.h"

namespace kiln {

// Why train.cuda_graphs cannot apply to `run`, as a message for the user; nothing when it can.
std::optional<std::string> cuda_graph_refusal(const AssembledRun& run);

class CapturedMicroStep {
 public:
  // `micro_step(inputs, targets)` returns the micro-step's loss after its backward; it is run
  // eagerly a few times to warm up, then captured. Call only when cuda_graph_refusal() is empty.
  using MicroStep = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;
  CapturedMicroStep(const AssembledRun& run, MicroStep micro_step);
  ~CapturedMicroStep();

  // Copies `inputs`/`targets` into the graph's own tensors and replays it (capturing it the
  // first time); the loss of this micro-step, detached.
  at::Tensor run(const at::Tensor& inputs, const at::Tensor& targets);

  // Zeroes the gradients in place: the graph's backward accumulates into their memory.
  void zero_gradients();

 private:
  struct Graph;
  std::unique_ptr<Graph> graph_;
};

}  // namespace kiln
