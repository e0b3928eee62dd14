// The global batch: the tokens of one optimizer step over all ranks, and the micro-steps each rank
// takes to make up its share. assemble() sizes a run's step with it; a Slurm job that may shrink
// checks each smaller world with it before it is submitted and again before it shrinks
// (core/app/slurm/node_range.h); a resume at another world size says with it what changed.
#pragma once

#include <cstdint>
#include <string>

#include "core/api/parallel.h"
#include "core/config/config.h"
#include "core/config/options.h"

namespace kiln {

struct StepBatch {
  int world = 1;            // ranks
  int data_world = 1;       // of them, those that read different data
  int64_t micro_batch = 0;  // sequences per micro-step
  int64_t micro_steps = 1;  // per optimizer step on each rank (gradient accumulation)
  int64_t tokens = 0;       // micro_steps x micro_batch x seq_len x data_world
};

// The step `config` (its [train] section read as `train`) makes under its own strategy in a
// world of `world` ranks, the world's shape said by the strategy itself (`shape`, or its rule
// when not given). A UserError when train.batch_tokens does not divide into the micro-steps of
// that shape, or the strategy needs another number of micro-steps than batch_tokens makes.
StepBatch step_batch(const ResolvedConfig& config, const TrainOptions& train, int world,
                     const WorldShape& shape);
StepBatch step_batch(const ResolvedConfig& config, int world);

// What a change of world did to the step, for a resume's "resume changes" line: "world size 3 ->
// 2: global batch kept at 768 tokens, each rank now 3 micro-step(s) of 4 sequences (was 2)".
std::string world_change(const StepBatch& before, const StepBatch& after);

}  // namespace kiln
