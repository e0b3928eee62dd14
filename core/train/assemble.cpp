#include "core/train/assemble.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <utility>

#include <fmt/format.h>

#include "core/api/tokenizer.h"
#include "core/checkpoint/hf_directory.h"
#include "core/train/cuda_graph.h"
#include "core/train/precision_workload.h"
#include "core/train/run_adapter.h"
#include "core/train/run_device.h"
#include "core/train/step_batch.h"
#include "core/train/task_suite.h"
#include "core/util/error.h"

namespace kiln {

namespace {

// Builds a plugin, giving its ParamError the place where the config set that key.
template <class Create>
auto located(const ResolvedConfig& config, const std::string& section, Create create) {
  try {
    return create();
  } catch (const ParamError& e) {
    throw UserError(fmt::format("{}: {}", config.where(section + "." + e.key()).str(), e.what()));
  }
}

// The optimizer the config names, over one stand-in parameter on `device`, after one step; sets
// `state_per_parameter` to the state it then keeps per parameter (memory_check.h).
std::shared_ptr<torch::optim::Optimizer> stand_in_optimizer(const ResolvedConfig& config,
                                                            const torch::Device& device,
                                                            double& state_per_parameter) {
  torch::Tensor parameter = torch::zeros({256, 256}, torch::TensorOptions().device(device));
  parameter.requires_grad_();
  auto optimizer = located(config, "optimizer", [&] {
    return OptimizerRegistry::create(config.type("optimizer"), config.params("optimizer"),
                                     std::vector<torch::Tensor>{parameter});
  });
  parameter.mutable_grad() = torch::ones_like(parameter);
  optimizer->step();
  state_per_parameter = kiln::state_per_parameter(*optimizer, parameter.numel());
  return optimizer;
}

// model.init_from (a .safetensors file or a Hugging Face model directory), when set, handed to
// `use`; its UserError gets the key's place. `needed_for`: why a model loaded from a snapshot
// reads it again (Adapter::needs_initial_weights), said when it is gone.
void read_initial_weights(const ResolvedConfig& config,
                          const std::function<void(const std::string&)>& use,
                          const std::string& needed_for = "") {
  const std::string init_from = config.params("model").path("init_from");
  if (init_from.empty()) return;
  std::error_code ec;
  if (!needed_for.empty() && !std::filesystem::exists(init_from, ec)) {
    throw UserError(fmt::format(
        "{}: model.init_from = \"{}\": '{}' is gone, and {}: put the run's base back there",
        config.where("model.init_from").str(), config.params("model").text("init_from"), init_from,
        needed_for));
  }
  try {
    use(init_from);
  } catch (const UserError& e) {
    throw UserError(fmt::format("{}: model.init_from = \"{}\": {}",
                                config.where("model.init_from").str(),
                                config.params("model").text("init_from"), e.what()));
  }
}

// `inner`, built over `span` steps, for a run of more: the steps past the span stay at the
// span's last lr (`kiln resume --keep-schedule`, docs/snapshots.md).
class HeldAfterSpan : public Schedule {
 public:
  HeldAfterSpan(std::shared_ptr<Schedule> inner, int64_t span)
      : inner_(std::move(inner)), last_(span - 1) {}
  double lr(int64_t step) const override { return inner_->lr(std::min(step, last_)); }
  bool decays() const override { return inner_->decays(); }

 private:
  std::shared_ptr<Schedule> inner_;
  int64_t last_;
};

// Data whose loss counts only some targets (DataSource::masks_loss) is trained by the trainer's
// own micro-steps: a pipeline's passes and a captured CUDA graph take every target's mean.
void refuse_masked_loss_where_unsupported(const AssembledRun& a) {
  if (!a.train_data->masks_loss()) return;
  const std::string data = a.config.type("data");
  if (a.parallel->stages() > 1) {
    throw UserError(fmt::format(
        "{}: data '{}' counts only some tokens in the loss, which parallel '{}' does not support "
        "yet (its stages compute every token's mean): use parallel.type = \"ddp\" or \"zero\"",
        a.config.where("parallel.type").str(), data, a.config.type("parallel")));
  }
  if (a.train.cuda_graphs) {
    throw UserError(fmt::format(
        "{}: train.cuda_graphs = true captures a loss over every token, and data '{}' counts "
        "only some: set train.cuda_graphs = false",
        a.config.where("train.cuda_graphs").str(), data));
  }
}

}  // namespace

int64_t schedule_span(const ResolvedConfig& config) {
  const int64_t span = config.params("schedule").integer("total_steps");
  return span > 0 ? span : train_options(config).steps;
}

std::shared_ptr<Schedule> make_schedule(const ResolvedConfig& config, double base_lr) {
  const int64_t steps = std::min(schedule_span(config), train_options(config).steps);
  auto schedule = located(config, "schedule", [&] {
    return ScheduleRegistry::create(config.type("schedule"), config.params("schedule"), base_lr,
                                    steps);
  });
  if (steps == train_options(config).steps) return schedule;
  return std::make_shared<HeldAfterSpan>(std::move(schedule), steps);
}

AssembledRun assemble(const ResolvedConfig& config, Assembly mode) {
  AssembledRun a;
  a.config = config;
  a.options = run_options(config);
  a.train = train_options(config);
  a.eval = eval_options(config);
  a.checkpoint = checkpoint_options(config);
  if (mode != Assembly::kCheck) a.core_share = apply_runtime_settings(a.options);
  a.device = pick_device(config, a.options.device, a.device_note);
  if (a.device.is_cuda()) a.current_device = std::make_shared<c10::DeviceGuard>(a.device);

  // eval, sample and export read a whole snapshot in one process, whatever strategy trained it
  // (a tp or pipeline run's own would ask for the world it trained in).
  const bool loading = mode == Assembly::kLoad || mode == Assembly::kWeights;
  a.parallel = loading ? ParallelRegistry::create("single", Params{}, a.device.type())
                       : ParallelRegistry::create(config.type("parallel"),
                                                  config.params("parallel"), a.device.type());
  // The step, by the ranks that read different data: all of them, or a pipeline's replicas.
  const StepBatch batch =
      step_batch(config, a.parallel->world_size(),
                 WorldShape{a.parallel->data_world(), a.parallel->micro_batches()});
  a.grad_accum = batch.micro_steps;
  a.batch_tokens = batch.tokens;

  a.model_plan = ModelRegistry::create(config.type("model"), config.params("model"));
  if (a.train.seq_len > a.model_plan->context_length) {
    throw UserError(fmt::format(
        "{}: train.seq_len = {} is longer than the model's context of {} "
        "tokens: lower train.seq_len or raise the model's context length",
        config.where("train.seq_len").str(), a.train.seq_len, a.model_plan->context_length));
  }
  a.parallel->check_layer_count(a.model_plan->layers);
  try {
    a.parallel->check_optimizer(config.type("optimizer"));
  } catch (const UserError& e) {
    throw UserError(fmt::format("{}: {}", config.where("optimizer.type").str(), e.what()));
  }
  if (const int64_t tp = a.parallel->tensor_parallel(); tp > 1) {
    if (!a.model_plan->check_tensor_parallel) {
      throw UserError(fmt::format(
          "{}: model.type = \"{}\" has no tensor-parallel form: use parallel.tp = 1 or a model "
          "that has one (gpt, llama)",
          config.where("parallel.tp").str(), config.type("model")));
    }
    try {
      a.model_plan->check_tensor_parallel(tp);
    } catch (const UserError& e) {
      throw UserError(fmt::format("{}: {}", config.where("parallel.tp").str(), e.what()));
    }
  }
  a.adapter = make_adapter(config);
  a.precision = located(config, "precision", [&] {
    return PrecisionRegistry::create(config.type("precision"), config.params("precision"),
                                     a.device.type());
  });
  a.precision->set_workload(precision_workload(config, *a.parallel));
  // Refused before any rank builds its model (and every rank refuses alike).
  if (a.precision->inspects_gradients() && !a.parallel->replicates_gradients()) {
    throw UserError(fmt::format(
        "{}: precision '{}' checks every gradient for overflow, but parallel '{}' leaves each "
        "rank only its shard of them: use precision.type = \"bf16\" or parallel.type = \"ddp\"",
        config.where("precision.type").str(), config.type("precision"), config.type("parallel")));
  }
  std::shared_ptr<torch::optim::Optimizer> stand_in;
  if (loading) {
    a.memory = loading_floor(*a.model_plan);
  } else {
    double state_per_parameter = 0;
    stand_in = stand_in_optimizer(config, a.device, state_per_parameter);
    // Only the ranks with a share of the loss compute logits (a pipeline's last stage).
    const int64_t logit_rows =
        a.parallel->loss_share() > 0 ? a.train.micro_batch * a.train.seq_len : 0;
    a.memory =
        training_floor(*a.model_plan, state_per_parameter, a.parallel->world_size(), logit_rows);
    if (a.adapter->adapts()) {
      // A frozen model keeps no gradients and no optimizer state (its adapter's are a sliver),
      // and maybe narrower weights: a floor is what training holds at the least.
      a.memory.gradients = a.memory.optimizer_state = 0;
      a.memory.weights *= a.adapter->narrowest_weight_bytes() / 4.0;
    }
  }
  check_memory_floor(config, *a.model_plan, a.memory, a.device, usable_memory(a.device));
  if (mode == Assembly::kCheck) {
    read_initial_weights(config, [](const std::string& path) { check_model_weights(path); });
    a.optimizer = stand_in;
  } else {
    a.model = build_model(*a.model_plan);
    // eval, sample and export load a snapshot over the weights: the run's start is not read
    // (and may have moved since), unless the adapter computes from it what snapshots lack.
    const std::string needed_for = a.adapter->needs_initial_weights();
    if (!loading || !needed_for.empty()) {
      read_initial_weights(
          config,
          [&](const std::string& path) {
            a.model->import_weights(read_model_weights(path, a.model->interchange_config()));
          },
          loading ? needed_for : "");
    }
    attach_adapter(config, *a.adapter, *a.model, /*starts=*/!loading);
    a.model->to(a.device);
    located(config, "parallel", [&] {
      a.parallel->attach(*a.model);
      return true;
    });
    a.optimizer = located(config, "optimizer", [&] {
      return OptimizerRegistry::create(config.type("optimizer"), config.params("optimizer"),
                                       parameters_of(*a.model));
    });
  }
  a.schedule = make_schedule(config, configured_lr(*a.optimizer));
  if (dynamic_cast<AveragedIterate*>(a.optimizer.get()) && a.schedule->decays()) {
    throw UserError(fmt::format(
        "{}: optimizer '{}' averages its iterates in place of a decaying learning rate, and "
        "schedule '{}' decays it: set schedule.type = \"constant\" (its warmup is the "
        "optimizer's warmup)",
        config.where("schedule.type").str(), config.type("optimizer"), config.type("schedule")));
  }

  if (a.train.pinned_batches == "on" && !a.device.is_cuda()) {
    throw UserError(
        fmt::format("{}: train.pinned_batches = \"on\" page-locks batches for copies "
                    "to a GPU, and this run trains on {}: use \"auto\" or \"off\"",
                    config.where("train.pinned_batches").str(), a.device.str()));
  }
  if (mode == Assembly::kWeights) return a;
  a.train_data = open_split(a, "train", "", /*training=*/true);
  if (!a.train_data) {
    throw UserError(fmt::format("{}: the data plugin '{}' found no training split",
                                config.where("data.type").str(), config.type("data")));
  }
  refuse_masked_loss_where_unsupported(a);
  a.val_data = open_split(a, "val");
  // Opened now, so that a bad test pattern stops the run before it starts, not after training.
  if (a.eval.final_test) a.test_data = open_split(a, "test");
  if (a.train.cuda_graphs) {
    if (auto why = cuda_graph_refusal(a)) throw UserError(*why);
  }
  if (a.eval.every > 0 && !a.val_data) {
    throw UserError(
        fmt::format("{}: eval.every = {} but the data has no validation split: "
                    "point the data section at validation shards or set eval.every "
                    "= 0",
                    config.where("eval.every").str(), a.eval.every));
  }
  // kiln eval names its own tasks; a run reads and checks its own before anything starts.
  if (mode == Assembly::kLoad || a.eval.tasks.empty()) return a;
  std::vector<Task> tasks =
      load_tasks(a.eval.tasks, config.where("eval.tasks").str() + ": eval.tasks");
  if (a.parallel->stages() > 1) {
    throw UserError(fmt::format(
        "{}: eval.tasks are not scored under pipeline parallelism (each stage holds part of the "
        "model): leave eval.tasks out and score them after the run with `kiln eval RUN --task "
        "{}`",
        config.where("eval.tasks").str(), tasks.front().spec.file));
  }
  a.tasks =
      std::make_shared<TaskSuite>(std::move(tasks), load_tokenizer(a.train_data->tokenizer_dir()),
                                  a.model_plan->context_length, a.model_plan->vocab_size);
  return a;
}

std::shared_ptr<DataSource> open_split(const AssembledRun& run, const std::string& split,
                                       const std::string& files, bool training) {
  DataRequest request{split,
                      run.train.micro_batch,
                      run.train.seq_len,
                      run.parallel->data_rank(),
                      run.parallel->data_world(),
                      run.model_plan->vocab_size,
                      run.train.pinned_batches == "on" ||
                          (run.train.pinned_batches == "auto" && run.device.is_cuda()),
                      files,
                      training,
                      static_cast<uint64_t>(run.options.seed),
                      run.train.steps,
                      run.train.micro_batch * run.parallel->data_world() * run.grad_accum};
  return DataRegistry::create(run.config.type("data"), run.config.params("data"), request);
}

}  // namespace kiln
