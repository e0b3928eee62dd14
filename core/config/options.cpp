#include "core/config/options.h"

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

RunOptions run_options(const ResolvedConfig& config) {
  const Params& p = config.params("run");
  return RunOptions{p.text("name"),   p.integer("seed"),    p.text("out_dir"),
                    p.text("db"),     p.text("sweep"),      p.integer("threads"),
                    p.text("device"), p.flag("share_cores")};
}

TrainOptions train_options(const ResolvedConfig& config) {
  const Params& p = config.params("train");
  return TrainOptions{p.integer("steps"),
                      p.integer("micro_batch"),
                      p.integer("seq_len"),
                      p.integer("batch_tokens"),
                      p.real("grad_clip"),
                      p.integer("log_every"),
                      p.text("on_nonfinite") == "abort",
                      p.flag("cuda_graphs"),
                      p.text("pinned_batches")};
}

EvalOptions eval_options(const ResolvedConfig& config) {
  const Params& p = config.params("eval");
  return EvalOptions{p.integer("every"), p.integer("steps"),      p.flag("final_test"),
                     p.path("tasks"),    p.integer("task_every"), p.integer("task_batch")};
}

CheckpointOptions checkpoint_options(const ResolvedConfig& config) {
  const Params& p = config.params("checkpoint");
  return CheckpointOptions{p.integer("every"), p.integer("keep"), p.flag("async")};
}

MetricsOptions metrics_options(const ResolvedConfig& config) {
  return MetricsOptions{config.params("metrics").text("tensorboard")};
}

int64_t TrainOptions::grad_accum(int world_size, const ResolvedConfig& config) const {
  const int64_t per_micro_step = micro_batch * seq_len * world_size;
  if (batch_tokens == 0) return 1;
  if (batch_tokens % per_micro_step != 0) {
    const int64_t lower = std::max<int64_t>(1, batch_tokens / per_micro_step) * per_micro_step;
    throw UserError(fmt::format(
        "{}: train.batch_tokens = {} is not a multiple of micro_batch x seq_len x world_size = "
        "{} x {} x {} = {}: set batch_tokens to a multiple such as {} (or 0 for one micro-batch)",
        config.where("train.batch_tokens").str(), batch_tokens, micro_batch, seq_len, world_size,
        per_micro_step, lower));
  }
  const int64_t micro_steps = batch_tokens / per_micro_step;
  constexpr int64_t kMostMicroSteps = 1 << 16;
  if (micro_steps > kMostMicroSteps) {
    throw UserError(fmt::format(
        "{}: train.batch_tokens = {} makes {} micro-steps per optimizer step (at most {}): raise "
        "train.micro_batch or lower train.batch_tokens",
        config.where("train.batch_tokens").str(), batch_tokens, micro_steps, kMostMicroSteps));
  }
  return micro_steps;
}

}  // namespace kiln
