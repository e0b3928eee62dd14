#include "core/train/run_header.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include "core/api/adapter.h"
#include "core/kernels/cpu_runtime.h"
#include "core/store/tensorboard/run_log.h"
#include "core/train/run_device.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// Where the header's thread count came from, and a word when it is not a rerun's for sure.
std::string threads_origin(const AssembledRun& run) {
  if (run.options.threads > 0) return " (run.threads)";
  if (fixed_threads(run.options) > 0) return " (OMP_NUM_THREADS)";
  const int kiln_processes = run.core_share ? run.core_share->processes() : 1;
  const int ranks_here = run.parallel->world_size();  // on one machine at most this many
  if (run.options.share_cores) {
    return fmt::format(
        " (this machine's share among {} Kiln processes, rechecked between steps: the numerics "
        "follow what else runs)",
        kiln_processes);
  }
  if (kiln_processes <= ranks_here) return " (the usable CPUs, fixed for the run)";
  return fmt::format(
      " (the usable CPUs, fixed for the run; {} other Kiln process(es) train on this machine "
      "and compete for them: set run.threads, or run.share_cores = true to divide them)",
      kiln_processes - ranks_here);
}

}  // namespace

std::vector<std::string> header_lines(const AssembledRun& run, const HeaderFacts& facts) {
  const auto& config = run.config;
  std::vector<std::string> lines;
  lines.push_back(fmt::format("run '{}' (id {}) in {} | config hash {}", facts.name, facts.run_id,
                              facts.store, config.hash()));
  lines.push_back("folder: " + facts.folder);
  const std::string tensorboard = metrics_options(config).tensorboard;
  if (!tensorboard.empty()) {
    lines.push_back("tensorboard: " + tensorboard_run_folder(tensorboard, facts.name) + "/");
  }
  lines.push_back(fmt::format(
      "model {}: {:.2f}M parameters, context {} | device {}{} | {} CPU threads{}",
      config.type("model"), run.model_plan->parameters / 1e6, run.model->context_length(),
      run.device.str(), run.device_note.empty() ? "" : " (" + run.device_note + ")",
      at::get_num_threads(), threads_origin(run)));
  if (run.adapter->adapts()) {
    const TrainableCounts counts = count_trainable(*run.model);
    const int64_t all = counts.trainable + counts.frozen;
    lines.push_back(fmt::format(
        "adapter {}: {} trainable parameters ({:.2f}% of {}); the model's own are frozen, in {}",
        config.type("adapter"), counts.trainable,
        100.0 * static_cast<double>(counts.trainable) / static_cast<double>(all), all,
        format_bytes(counts.frozen_bytes)));
  }
  lines.push_back(cpu_runtime_report());
  if (const std::string chosen = run.precision->describe(); !chosen.empty())
    lines.push_back(chosen);
  lines.push_back("data: " + run.train_data->describe());
  // Ranks that read the same batches (pipeline stages, a tensor-parallel group) count once.
  const int replicas = run.parallel->data_world(), world = run.parallel->world_size();
  lines.push_back(fmt::format(
      "batch: {} tokens per step = micro_batch {} x seq_len {} x {} micro-steps x {} | {} steps",
      run.batch_tokens, run.train.micro_batch, run.train.seq_len, run.grad_accum,
      replicas == world ? fmt::format("{} rank(s)", world)
                        : fmt::format("{} replica(s) of {} ranks", replicas, world / replicas),
      run.train.steps));
  if (facts.start_step > 0) {
    lines.push_back(fmt::format("resuming after step {} ({} tokens seen)", facts.start_step,
                                facts.tokens_seen));
  }
  return lines;
}

RunEnvironment run_environment(const AssembledRun& run) {
  const std::string precision = run.precision->runs_as();
  return {{"threads", std::to_string(at::get_num_threads())},
          {"precision", precision.empty() ? run.config.type("precision") : precision}};
}

}  // namespace kiln
