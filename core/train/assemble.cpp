#include "core/train/assemble.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <utility>

#include <fmt/format.h>

#include "core/api/tokenizer.h"
#include "core/checkpoint/hf_directory.h"
#include "core/train/compatibility_rules.h"
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

}  // namespace

int64_t schedule_span(const ResolvedConfig& config, const TrainOptions& train) {
  const int64_t span = config.params("schedule").integer("total_steps");
  return span > 0 ? span : train.steps;
}

std::shared_ptr<Schedule> make_schedule(const ResolvedConfig& config, const TrainOptions& train,
                                        double base_lr) {
  const int64_t steps = std::min(schedule_span(config, train), train.steps);
  auto schedule = located(config, "schedule", [&] {
    return ScheduleRegistry::create(config.type("schedule"), config.params("schedule"), base_lr,
                                    steps);
  });
  if (steps == train.steps) return schedule;
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
      step_batch(config, a.train, a.parallel->world_size(),
                 WorldShape{a.parallel->data_world(), a.parallel->micro_batches()});
  a.grad_accum = batch.micro_steps;
  a.batch_tokens = batch.tokens;

  a.model_plan = located(config, "model", [&] {
    return ModelRegistry::create(config.type("model"), config.params("model"));
  });
  check_compatibility(a, AssemblyPoint::kPlanned);
  a.adapter = make_adapter(config);
  a.precision = located(config, "precision", [&] {
    return PrecisionRegistry::create(config.type("precision"), config.params("precision"),
                                     a.device.type());
  });
  a.precision->set_workload(precision_workload(config, a.train, *a.parallel));
  check_compatibility(a, AssemblyPoint::kPrecision);
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
  a.schedule = make_schedule(config, a.train, configured_lr(*a.optimizer));
  check_compatibility(a, AssemblyPoint::kScheduled);
  if (mode == Assembly::kWeights) return a;
  a.train_data = open_split(a, "train", "", /*training=*/true);
  if (!a.train_data) {
    throw UserError(fmt::format("{}: the data plugin '{}' found no training split",
                                config.where("data.type").str(), config.type("data")));
  }
  check_compatibility(a, AssemblyPoint::kTrainSplit);
  a.val_data = open_split(a, "val");
  // Opened now, so that a bad test pattern stops the run before it starts, not after training.
  if (a.eval.final_test) a.test_data = open_split(a, "test");
  check_compatibility(a, AssemblyPoint::kSplits);
  // kiln eval names its own tasks; a run reads and checks its own before anything starts.
  if (mode == Assembly::kLoad || a.eval.tasks.empty()) return a;
  std::vector<Task> tasks =
      load_tasks(a.eval.tasks, config.where("eval.tasks").str() + ": eval.tasks");
  check_compatibility(a, AssemblyPoint::kTasksRead, tasks);
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
