#include "core/train/assemble.h"

#include <cstdlib>
#include <thread>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include "core/checkpoint/weights_io.h"
#include "core/util/error.h"

namespace kiln {

namespace {

// run.threads = 0: the cores shared among the processes on this machine (LOCAL_WORLD_SIZE, set by
// torchrun and kiln launch). More threads than cores make OpenMP's spinning workers fight: steps
// ran 10-25x slower here with 4 ranks of 2 threads on 2 cores.
int default_threads() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const char* local = std::getenv("LOCAL_WORLD_SIZE");
  const int processes = local ? std::max(1, std::atoi(local)) : 1;
  return std::max(1, cores / processes);
}

}  // namespace

void apply_runtime_settings(const RunOptions& run) {
  at::set_num_threads(static_cast<int>(run.threads > 0 ? run.threads : default_threads()));
  torch::manual_seed(static_cast<uint64_t>(run.seed));
}

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

torch::Device pick_device(const ResolvedConfig& config, const std::string& wanted) {
  const bool have_cuda = torch::cuda::is_available();
  if (wanted == "cuda" && !have_cuda) {
    throw UserError(
        fmt::format("{}: run.device = \"cuda\" but this LibTorch sees no CUDA device: "
                    "use \"cpu\" or \"auto\"",
                    config.where("run.device").str()));
  }
  return (wanted == "cuda" || (wanted == "auto" && have_cuda)) ? torch::Device(torch::kCUDA)
                                                               : torch::Device(torch::kCPU);
}

}  // namespace

AssembledRun assemble(const ResolvedConfig& config) {
  AssembledRun a;
  a.config = config;
  a.options = run_options(config);
  a.train = train_options(config);
  a.eval = eval_options(config);
  a.checkpoint = checkpoint_options(config);
  apply_runtime_settings(a.options);
  a.device = pick_device(config, a.options.device);

  a.parallel = ParallelRegistry::create(config.type("parallel"), config.params("parallel"));
  // Ranks that read different data: all of them, or, in a pipeline, one per replica.
  const int readers = a.parallel->data_world();
  a.grad_accum = a.train.grad_accum(readers, config);
  if (const int64_t wanted = a.parallel->micro_batches(); wanted > 0) {
    if (a.train.batch_tokens == 0) {
      a.grad_accum = wanted;
    } else if (a.grad_accum != wanted) {
      throw UserError(fmt::format(
          "{}: train.batch_tokens = {} makes {} micro-batches per step, but parallel.microbatches "
          "= {}: set train.batch_tokens = {} (or 0), or parallel.microbatches = {}",
          config.where("train.batch_tokens").str(), a.train.batch_tokens, a.grad_accum, wanted,
          wanted * a.train.micro_batch * a.train.seq_len * readers, a.grad_accum));
    }
  }
  a.batch_tokens = a.grad_accum * a.train.micro_batch * a.train.seq_len * readers;

  a.model = ModelRegistry::create(config.type("model"), config.params("model"));
  if (a.train.seq_len > a.model->context_length()) {
    throw UserError(fmt::format(
        "{}: train.seq_len = {} is longer than the model's context of {} "
        "tokens: lower train.seq_len or raise the model's context length",
        config.where("train.seq_len").str(), a.train.seq_len, a.model->context_length()));
  }
  const std::string& init_from = config.params("model").text("init_from");
  if (!init_from.empty()) {
    try {
      a.model->import_weights(read_weights(init_from));
    } catch (const UserError& e) {
      throw UserError(fmt::format("{}: model.init_from = \"{}\": {}",
                                  config.where("model.init_from").str(), init_from, e.what()));
    }
  }
  a.model->to(a.device);
  a.parallel->attach(*a.model);

  a.optimizer = located(config, "optimizer", [&] {
    return OptimizerRegistry::create(config.type("optimizer"), config.params("optimizer"),
                                     a.model->parameters());
  });
  a.schedule = located(config, "schedule", [&] {
    return ScheduleRegistry::create(config.type("schedule"), config.params("schedule"),
                                    configured_lr(*a.optimizer), a.train.steps);
  });
  a.precision = located(config, "precision", [&] {
    return PrecisionRegistry::create(config.type("precision"), config.params("precision"),
                                     a.device.type());
  });
  if (a.precision->inspects_gradients() && !a.parallel->replicates_gradients()) {
    throw UserError(fmt::format(
        "{}: precision '{}' checks every gradient for overflow, but parallel '{}' leaves each "
        "rank only its shard of them: use precision.type = \"bf16\" or parallel.type = \"ddp\"",
        config.where("precision.type").str(), config.type("precision"), config.type("parallel")));
  }

  a.train_data = open_split(a, "train");
  if (!a.train_data) {
    throw UserError(fmt::format("{}: the data plugin '{}' found no training split",
                                config.where("data.type").str(), config.type("data")));
  }
  a.val_data = open_split(a, "val");
  // Opened now, so that a bad test pattern stops the run before it starts, not after training.
  if (a.eval.final_test) a.test_data = open_split(a, "test");
  if (a.eval.every > 0 && !a.val_data) {
    throw UserError(
        fmt::format("{}: eval.every = {} but the data has no validation split: "
                    "point the data section at validation shards or set eval.every "
                    "= 0",
                    config.where("eval.every").str(), a.eval.every));
  }
  return a;
}

std::shared_ptr<DataSource> open_split(const AssembledRun& run, const std::string& split) {
  DataRequest request{split,
                      run.train.micro_batch,
                      run.train.seq_len,
                      run.parallel->data_rank(),
                      run.parallel->data_world(),
                      run.model->vocab_size(),
                      run.device.is_cuda()};
  return DataRegistry::create(run.config.type("data"), run.config.params("data"), request);
}

}  // namespace kiln
