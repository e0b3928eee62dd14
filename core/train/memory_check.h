// The memory a run needs at least, weighed before its model is built (core/train/assemble.h), so
// that a model too large for the machine is one clear line instead of an allocation failure, the
// OOM killer, or a sweep member failing after the others started.
//
// A floor, not a forecast. Training holds at once, at the least:
//   weights    4 bytes per parameter and buffer (float32: the precision policies autocast the
//              forward pass and keep float32 weights), on every rank (each builds the whole model);
//   gradients  4 bytes per parameter, and the optimizer's state per parameter (measured, below),
//              both divided by the world size, as if sharded perfectly (zero shards them, ddp
//              does not);
//   logits     one micro-batch's logits and their gradient, in float32 (the loss is computed in
//              float32), on the ranks that compute the loss.
// A run may need more (the other layers' activations, the allocator's slack), never less: one whose
// floor is above the memory it may use cannot run, and is refused. Loading a model to evaluate,
// sample or export it needs its weights only.
#pragma once

#include <cstdint>

#include <c10/core/Device.h>

#include "core/api/model.h"
#include "core/config/config.h"

namespace torch::optim {
class Optimizer;
}

namespace kiln {

struct MemoryFloor {
  double weights = 0, gradients = 0, optimizer_state = 0, logits = 0;  // bytes
  double total() const { return weights + gradients + optimizer_state + logits; }
};

// Training `model` over `world_size` ranks with an optimizer that keeps `state_per_parameter`
// float32 numbers per parameter, on a rank whose micro-batches give `logit_rows` rows of logits
// (micro_batch x seq_len; 0 on a rank that computes no loss, a pipeline's earlier stages).
MemoryFloor training_floor(const ModelPlan& model, double state_per_parameter, int world_size,
                           int64_t logit_rows);
// Holding `model`'s weights (eval, sample, export).
MemoryFloor loading_floor(const ModelPlan& model);

// Float32 numbers of state `optimizer` keeps per parameter, measured on an optimizer over one
// stand-in parameter of `parameter_numel` numbers that has taken one step: its state tensors'
// bytes (core/api/optimizer.h) over 4 x parameter_numel (AdamW 2, Lion 1, SGD without momentum 0).
double state_per_parameter(torch::optim::Optimizer& optimizer, int64_t parameter_numel);
// Bytes of the parameters, their gradients and the optimizer state this process holds (the
// training state fsdp, zero and tensor parallelism shard).
int64_t training_state_bytes(Model& model, torch::optim::Optimizer& optimizer);

// A model's parameters by whether they train, and the frozen ones' bytes: an adapter freezes
// the model's own (core/api/adapter.h) and may keep them narrower than fp32.
struct TrainableCounts {
  int64_t trainable = 0, frozen = 0, frozen_bytes = 0;
};
TrainableCounts count_trainable(Model& model);

// The environment variable in which a sweep gives a member it starts the bytes the members
// already running beside it on this machine are yet to take (each one's floor less what it holds
// resident): MemAvailable does not count memory a member that started a moment ago has not
// touched yet, so two members that each fit alone would both start and then run out.
inline constexpr const char* kMemoryReserved = "KILN_MEMORY_RESERVED";

// The bytes one process may use on `device`: the GPU's memory, or the CPU's MemAvailable
// (/proc/meminfo) less kMemoryReserved, shared among this machine's ranks (LOCAL_WORLD_SIZE); 0
// when it cannot be told.
double usable_memory(const c10::Device& device);

// A UserError at the model section's place when `floor` is above what `usable` bytes allow on
// `device`: the model, the floor's parts and how to fix it. Nothing when `usable` is 0.
void check_memory_floor(const ResolvedConfig& config, const ModelPlan& model,
                        const MemoryFloor& floor, const c10::Device& device, double usable);

}  // namespace kiln
