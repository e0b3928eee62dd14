// What precision "auto"'s measurement is kept by besides the CPU
// (core/kernels/precision_verdicts.h): what decides the mix of matrix products each rank computes,
// and nothing else, so that every run of one workload finds the verdict `kiln bench` measured for
// it, however it is launched.
//
//   "gpt n_embd=768 ... | adapter lora base_dtype=int8 rank=8 ... | micro_batch 8 x seq_len 1024
//    | tp 1 | stages 1"
//
// In it: the model's type and keys, and the adapter's (a frozen base skips its weights'
// gradients, an adapter adds products of its rank, an int8 base reads its weights as int8), the
// weights' and adapter's sources left out (another file of the same shapes is the same work); the
// micro-batch and the sequence length; and the parallel strategy's cut of each rank's share
// (ParallelStrategy: tensor_parallel and stages), which data parallelism (ddp, zero, fsdp) leaves
// as one process's. Not in it: LibTorch's thread count, which `kiln sweep --jobs` and the ranks
// of a launch divide among themselves, so a key holding it was never the one bench had written.
#pragma once

#include <string>

#include "core/api/parallel.h"
#include "core/config/config.h"
#include "core/config/options.h"

namespace kiln {

// The same for `kiln bench` (core/app/speed/precision_check.cpp) and the run it speaks for;
// `train` is the config's [train] section (train_options()).
std::string precision_workload(const ResolvedConfig& config, const TrainOptions& train,
                               const ParallelStrategy& parallel);

}  // namespace kiln
