// Rows that hold several documents back to back (data.pack: fine-tuning records, or pretraining
// documents cut after their separator token). Each token's position is its index within its own
// document, restarting at 0 where a document starts, and attention stays inside a document:
// query t sees keys t - position[t] .. t. The positions alone say both, so a batch carries only
// them (Batch::positions), and the models read them here, from the scope the trainer opens
// around each micro-batch's forward pass, as they read dropout's key (core/layers/random_draws.h).
// Outside any scope every row is one document: positions 0 .. time - 1, plain causal attention.
#pragma once

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace kiln {

// Sets the positions of the forward passes run while it lives (on this thread), restoring the
// previous ones after. `positions`: int64 [batch, time], copied to `device` (if given; an
// asynchronous copy from pinned memory); undefined = every row is one document.
class PositionScope {
 public:
  explicit PositionScope(const at::Tensor& positions,
                         std::optional<c10::Device> device = std::nullopt);
  ~PositionScope();
  PositionScope(const PositionScope&) = delete;
  PositionScope& operator=(const PositionScope&) = delete;

 private:
  at::Tensor previous_;
};

// The positions in force on this thread: int64 [batch, time] on the model's device, or undefined
// outside any PositionScope. Activation checkpointing captures them for its recomputation.
at::Tensor current_positions();

// Each token's position in a forward pass over `time` tokens: current_positions(), or
// 0 .. time - 1 as a [time] tensor (which broadcasts over the rows) when no scope is open.
at::Tensor token_positions(int64_t time, const at::TensorOptions& options);

// bool [batch, 1, time, time], true where query t may see key j (t - positions[t] <= j <= t):
// the block-diagonal causal mask of packed rows, for attention that takes an explicit mask.
at::Tensor document_causal_mask(const at::Tensor& positions);

}  // namespace kiln
