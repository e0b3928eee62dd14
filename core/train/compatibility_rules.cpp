#include "core/train/compatibility_rules.h"

#include <fmt/format.h>

#include "core/train/cuda_graph.h"
#include "core/util/error.h"

namespace kiln {

namespace {

using Tasks = std::vector<Task>;
using Refusal = std::optional<std::string>;

// A plugin's own check of another plugin's choice, its UserError placed at `key`'s source.
template <class Check>
Refusal located_check(const AssembledRun& run, const std::string& key, Check check) {
  try {
    check();
  } catch (const UserError& e) {
    return fmt::format("{}: {}", run.config.where(key).str(), e.what());
  }
  return std::nullopt;
}

Refusal seq_len_within_context(const AssembledRun& run, const Tasks&) {
  if (run.train.seq_len <= run.model_plan->context_length) return std::nullopt;
  return fmt::format(
      "{}: train.seq_len = {} is longer than the model's context of {} "
      "tokens: lower train.seq_len or raise the model's context length",
      run.config.where("train.seq_len").str(), run.train.seq_len, run.model_plan->context_length);
}

// The strategy's own words (a pipeline's cut into stages), placed by the strategy.
Refusal layers_fit_the_strategy(const AssembledRun& run, const Tasks&) {
  try {
    run.parallel->check_layer_count(run.model_plan->layers);
  } catch (const UserError& e) {
    return e.what();
  }
  return std::nullopt;
}

Refusal optimizer_fits_the_strategy(const AssembledRun& run, const Tasks&) {
  return located_check(run, "optimizer.type",
                       [&] { run.parallel->check_optimizer(run.config.type("optimizer")); });
}

Refusal model_has_a_tensor_parallel_form(const AssembledRun& run, const Tasks&) {
  if (run.parallel->tensor_parallel() <= 1 || run.model_plan->check_tensor_parallel) {
    return std::nullopt;
  }
  return fmt::format(
      "{}: model.type = \"{}\" has no tensor-parallel form: use parallel.tp = 1 or a model "
      "that has one (gpt, llama)",
      run.config.where("parallel.tp").str(), run.config.type("model"));
}

Refusal model_splits_over_tensor_ranks(const AssembledRun& run, const Tasks&) {
  const int64_t tp = run.parallel->tensor_parallel();
  if (tp <= 1 || !run.model_plan->check_tensor_parallel) return std::nullopt;
  return located_check(run, "parallel.tp", [&] { run.model_plan->check_tensor_parallel(tp); });
}

Refusal overflow_checks_see_whole_gradients(const AssembledRun& run, const Tasks&) {
  if (!run.precision->inspects_gradients() || run.parallel->replicates_gradients()) {
    return std::nullopt;
  }
  return fmt::format(
      "{}: precision '{}' checks every gradient for overflow, but parallel '{}' leaves each "
      "rank only its shard of them: use precision.type = \"bf16\" or parallel.type = \"ddp\"",
      run.config.where("precision.type").str(), run.config.type("precision"),
      run.config.type("parallel"));
}

Refusal averaged_iterates_without_decay(const AssembledRun& run, const Tasks&) {
  if (!dynamic_cast<AveragedIterate*>(run.optimizer.get()) || !run.schedule->decays()) {
    return std::nullopt;
  }
  return fmt::format(
      "{}: optimizer '{}' averages its iterates in place of a decaying learning rate, and "
      "schedule '{}' decays it: set schedule.type = \"constant\" (its warmup is the "
      "optimizer's warmup)",
      run.config.where("schedule.type").str(), run.config.type("optimizer"),
      run.config.type("schedule"));
}

Refusal pinned_batches_on_a_gpu(const AssembledRun& run, const Tasks&) {
  if (run.train.pinned_batches != "on" || run.device.is_cuda()) return std::nullopt;
  return fmt::format(
      "{}: train.pinned_batches = \"on\" page-locks batches for copies "
      "to a GPU, and this run trains on {}: use \"auto\" or \"off\"",
      run.config.where("train.pinned_batches").str(), run.device.str());
}

// Data whose loss counts only some targets (DataSource::masks_loss) is trained by the trainer's
// own micro-steps: a pipeline's passes and a captured CUDA graph take every target's mean.
Refusal masked_loss_outside_a_pipeline(const AssembledRun& run, const Tasks&) {
  if (!run.train_data->masks_loss() || run.parallel->stages() <= 1) return std::nullopt;
  return fmt::format(
      "{}: data '{}' counts only some tokens in the loss, which parallel '{}' does not support "
      "yet (its stages compute every token's mean): use parallel.type = \"ddp\" or \"zero\"",
      run.config.where("parallel.type").str(), run.config.type("data"),
      run.config.type("parallel"));
}

Refusal masked_loss_outside_a_cuda_graph(const AssembledRun& run, const Tasks&) {
  if (!run.train_data->masks_loss() || !run.train.cuda_graphs) return std::nullopt;
  return fmt::format(
      "{}: train.cuda_graphs = true captures a loss over every token, and data '{}' counts "
      "only some: set train.cuda_graphs = false",
      run.config.where("train.cuda_graphs").str(), run.config.type("data"));
}

// A model's auxiliary losses (ModelPlan::auxiliary_losses) enter the loss in the trainer's own
// micro-steps too; a captured graph also fixes the shapes, which a router's choices change.
Refusal auxiliary_losses_outside_a_pipeline(const AssembledRun& run, const Tasks&) {
  if (!run.model_plan->auxiliary_losses || run.parallel->micro_batches() == 0) return std::nullopt;
  return fmt::format(
      "{}: parallel '{}' computes the loss in its own passes, without the auxiliary losses of "
      "{}: use parallel.type = \"ddp\", \"zero\" or \"fsdp\", or a dense model",
      run.config.where("parallel.type").str(), run.config.type("parallel"),
      run.model_plan->description);
}

Refusal auxiliary_losses_outside_a_cuda_graph(const AssembledRun& run, const Tasks&) {
  if (!run.model_plan->auxiliary_losses || !run.train.cuda_graphs) return std::nullopt;
  return fmt::format(
      "{}: train.cuda_graphs = true captures fixed shapes, and the shapes of {} follow its "
      "router: set train.cuda_graphs = false",
      run.config.where("train.cuda_graphs").str(), run.model_plan->description);
}

Refusal cuda_graphs_capture_the_step(const AssembledRun& run, const Tasks&) {
  if (!run.train.cuda_graphs) return std::nullopt;
  return cuda_graph_refusal(run);
}

Refusal periodic_eval_has_a_val_split(const AssembledRun& run, const Tasks&) {
  if (run.eval.every <= 0 || run.val_data) return std::nullopt;
  return fmt::format(
      "{}: eval.every = {} but the data has no validation split: "
      "point the data section at validation shards or set eval.every "
      "= 0",
      run.config.where("eval.every").str(), run.eval.every);
}

Refusal tasks_scored_outside_a_pipeline(const AssembledRun& run, const Tasks& tasks) {
  if (tasks.empty() || run.parallel->stages() <= 1) return std::nullopt;
  return fmt::format(
      "{}: eval.tasks are not scored under pipeline parallelism (each stage holds part of the "
      "model): leave eval.tasks out and score them after the run with `kiln eval RUN --task "
      "{}`",
      run.config.where("eval.tasks").str(), tasks.front().spec.file);
}

}  // namespace

const std::vector<CompatibilityRule>& compatibility_rules() {
  using P = AssemblyPoint;
  static const std::vector<CompatibilityRule> rules = {
      {"seq_len_within_context", P::kPlanned, seq_len_within_context},
      {"layers_fit_the_strategy", P::kPlanned, layers_fit_the_strategy},
      {"optimizer_fits_the_strategy", P::kPlanned, optimizer_fits_the_strategy},
      {"model_has_a_tensor_parallel_form", P::kPlanned, model_has_a_tensor_parallel_form},
      {"model_splits_over_tensor_ranks", P::kPlanned, model_splits_over_tensor_ranks},
      {"auxiliary_losses_outside_a_pipeline", P::kPlanned, auxiliary_losses_outside_a_pipeline},
      {"auxiliary_losses_outside_a_cuda_graph", P::kPlanned, auxiliary_losses_outside_a_cuda_graph},
      {"overflow_checks_see_whole_gradients", P::kPrecision, overflow_checks_see_whole_gradients},
      {"averaged_iterates_without_decay", P::kScheduled, averaged_iterates_without_decay},
      {"pinned_batches_on_a_gpu", P::kScheduled, pinned_batches_on_a_gpu},
      {"masked_loss_outside_a_pipeline", P::kTrainSplit, masked_loss_outside_a_pipeline},
      {"masked_loss_outside_a_cuda_graph", P::kTrainSplit, masked_loss_outside_a_cuda_graph},
      {"cuda_graphs_capture_the_step", P::kSplits, cuda_graphs_capture_the_step},
      {"periodic_eval_has_a_val_split", P::kSplits, periodic_eval_has_a_val_split},
      {"tasks_scored_outside_a_pipeline", P::kTasksRead, tasks_scored_outside_a_pipeline},
  };
  return rules;
}

void check_compatibility(const AssembledRun& run, AssemblyPoint point,
                         const std::vector<Task>& tasks) {
  for (const CompatibilityRule& rule : compatibility_rules()) {
    if (rule.point != point) continue;
    if (std::optional<std::string> refusal = rule.refusal(run, tasks)) throw UserError(*refusal);
  }
}

}  // namespace kiln
