#include "core/train/step_batch.h"

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

StepBatch step_batch(const ResolvedConfig& config, const TrainOptions& train, int world,
                     const WorldShape& shape) {
  StepBatch batch{world, shape.data_world, train.micro_batch, 1, 0};
  batch.micro_steps = train.grad_accum(shape.data_world, config);
  if (const int64_t wanted = shape.micro_batches; wanted > 0) {
    if (train.batch_tokens == 0) {
      batch.micro_steps = wanted;
    } else if (batch.micro_steps != wanted) {
      throw UserError(fmt::format(
          "{}: train.batch_tokens = {} makes {} micro-batches per step, but parallel.microbatches "
          "= {}: set train.batch_tokens = {} (or 0), or parallel.microbatches = {}",
          config.where("train.batch_tokens").str(), train.batch_tokens, batch.micro_steps, wanted,
          wanted * train.micro_batch * train.seq_len * shape.data_world, batch.micro_steps));
    }
  }
  batch.tokens = batch.micro_steps * train.micro_batch * train.seq_len * shape.data_world;
  return batch;
}

StepBatch step_batch(const ResolvedConfig& config, int world) {
  return step_batch(config, train_options(config), world,
                    world_shape(config.type("parallel"), config.params("parallel"), world));
}

std::string world_change(const StepBatch& before, const StepBatch& after) {
  const std::string global =
      before.tokens == after.tokens
          ? fmt::format("global batch kept at {} tokens", after.tokens)
          : fmt::format(
                "global batch {} -> {} tokens (train.batch_tokens = 0: it follows the "
                "world)",
                before.tokens, after.tokens);
  return fmt::format(
      "world size {} -> {}: {}, each rank now {} micro-step(s) of {} sequences "
      "(was {})",
      before.world, after.world, global, after.micro_steps, after.micro_batch, before.micro_steps);
}

}  // namespace kiln
