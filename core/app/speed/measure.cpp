#include "core/app/speed/measure.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/cuda.h>

#include "core/app/speed/compare.h"
#include "core/checkpoint/snapshot.h"
#include "core/config/options.h"
#include "core/kernels/cpu_peak.h"
#include "core/kernels/cpu_runtime.h"
#include "core/kernels/kernel_cpuinfo.h"
#include "core/store/runs/paths.h"
#include "core/store/runs/writer.h"
#include "core/train/assemble.h"
#include "core/train/console.h"
#include "core/train/memory_check.h"
#include "core/train/precision_workload.h"
#include "core/train/rank_figures.h"
#include "core/train/session.h"
#include "core/train/trainer.h"
#include "core/util/allocation_meter.h"
#include "core/util/build_info.h"
#include "core/util/error.h"
#include "core/util/freed_memory.h"
#include "core/util/fs.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Waits for `device`'s queued work: synchronize() without an index waits on the current device
// only, which on rank k > 0 would time none of the run's work.
void sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

// n of the n x n x n matmuls measured_peak_flops times.
int64_t peak_matmul_size(const torch::Device& device) {
  return device.is_cuda() ? 8192 : 1024;
}

// FLOP/s of the best of a few n x n x n matmuls in `dtype`: what this device reaches in
// practice, beside the hardware's peak.
double measured_peak_flops(const torch::Device& device, at::ScalarType dtype) {
  const int64_t n = peak_matmul_size(device);
  auto options = at::TensorOptions().device(device).dtype(dtype);
  auto a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  double best_ms = 1e300;
  for (int i = 0; i < 6; ++i) {
    sync(device);
    const auto start = Clock::now();
    auto c = at::matmul(a, b);
    sync(device);
    if (i > 0) best_ms = std::min(best_ms, ms_since(start));  // the first one warms up
  }
  return 2.0 * static_cast<double>(n) * n * n / (best_ms / 1000.0);
}

double peak_rss_mb() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

// The names core/kernels/cpu_peak.h knows ("fp32", "bf16"); LibTorch's for the others.
std::string dtype_name(at::ScalarType dtype) {
  if (dtype == at::kFloat) return "fp32";
  if (dtype == at::kBFloat16) return "bf16";
  return c10::toString(dtype);
}

// What this measurement is of, known before anything is timed: the fields --against checks.
BenchRecord identity(const ResolvedConfig& config, const AssembledRun& run,
                     const BenchOptions& options, const CpuFeatures& cpu) {
  BenchRecord r;
  r.git_commit = build_git_commit();
  r.config_hash = config.hash();
  r.experiment = config.experiment;
  r.machine = {cpu_display_name(cpu.model_name, cpu.kernel_model_name),
               static_cast<int64_t>(std::thread::hardware_concurrency()), feature_summary(cpu),
               run.device.str(), at::get_num_threads()};
  r.blas = cpu_runtime_report();
  r.steps = options.steps;
  r.warmup = options.warmup;
  return r;
}

// The store --record and --against use, or null when neither was given. --against alone on a
// store that does not exist is refused rather than creating one.
std::unique_ptr<RunStore> open_results(const ResolvedConfig& config, const BenchOptions& options) {
  if (!options.record && !options.against) return nullptr;
  const std::string db = run_options(config).db;
  if (!options.record && !store_may_exist(db)) {
    throw UserError(
        fmt::format("no bench result '{}': run store '{}' does not exist; `kiln "
                    "bench EXPERIMENT --record {}` records one",
                    *options.against, db, *options.against));
  }
  return std::make_unique<RunStore>(db);
}

struct Timings {
  PhaseTimes phases;  // summed over the timed steps
  double step_ms = 0, logging_ms = 0, snapshot_ms = 0;
  uintmax_t snapshot_bytes = 0;
  AllocationCounts memory;  // live after the last timed step, its peak within that step
};

Timings time_steps(const ResolvedConfig& config, AssembledRun& run, const BenchOptions& options) {
  Trainer trainer(run);
  keep_freed_memory();  // as a run does (core/train/session.h)
  ScratchDir scratch;
  RunStore store(scratch / "bench.db");
  const int64_t run_id =
      store.create_run(NewRun{"bench", config.experiment, config.to_toml(), config.hash(),
                              run.options.seed, 1, options.steps, "", "", "", "", ""});
  Console console(options.steps);
  for (int64_t step = 1; step <= options.warmup; ++step)
    trainer.train_step(step);
  trainer.set_profiling(true);
  Timings t;
  for (int64_t step = 1; step <= options.steps; ++step) {
    if (step == options.steps) reset_allocation_peak(run.device);
    StepStats s = trainer.train_step(options.warmup + step);
    if (step == options.steps) t.memory = allocation_counts(run.device);
    const PhaseTimes& p = trainer.last_phases();
    t.phases.data_ms += p.data_ms;
    t.phases.forward_ms += p.forward_ms;
    t.phases.backward_ms += p.backward_ms;
    t.phases.communication_ms += p.communication_ms;
    t.phases.optimizer_ms += p.optimizer_ms;
    t.step_ms += s.dt_ms;
    // What a real run adds per step: the metrics row and the console line.
    const auto start = Clock::now();
    store.add_metric(run_id, metric_row(s, 1));
    std::string line = console.format_step(s);
    t.logging_ms += ms_since(start);
  }
  const auto flush_start = Clock::now();
  store.flush();
  t.logging_ms += ms_since(flush_start);

  const auto snapshot_start = Clock::now();
  SnapshotState state;
  state.step = options.steps;
  const RunPaths paths = RunPaths::in_folder(scratch.str(), "bench");
  write_snapshot(paths.snapshots(), "step_bench", *run.model, *run.optimizer, state);
  t.snapshot_ms = ms_since(snapshot_start);
  for (const auto& f : std::filesystem::directory_iterator(paths.snapshot("step_bench"))) {
    t.snapshot_bytes += f.file_size();
  }
  return t;
}

// Fills `r`'s numbers; returns the MFU lines: against the hardware's peak, where Kiln knows it
// (a CPU), and against the measured matmul.
std::string measure_mfu(BenchRecord& r, const AssembledRun& run, const CpuFeatures& cpu) {
  const at::ScalarType dtype = run.precision->compute_dtype();
  r.measured_peak_flops = measured_peak_flops(run.device, dtype);
  r.mfu_of_measured_peak = r.achieved_flops / r.measured_peak_flops;
  const int cores = std::min(available_cores(), at::get_num_threads());
  const std::string name = dtype_name(dtype);
  const auto hardware = run.device.is_cpu()
                            ? cpu_peak(cpu, name, cores, core_clock_hz(),
                                       name == "bf16" ? timed_bf16_dot_ratio(cpu) : 0)
                            : std::nullopt;
  std::string out;
  if (hardware) {
    r.hardware_peak_flops = hardware->flops;
    r.mfu = r.achieved_flops / hardware->flops;
    out =
        fmt::format("MFU             {:.1f}% (hardware peak {:.2f} GFLOP/s = {})\n", 100.0 * *r.mfu,
                    hardware->flops / 1e9, describe_peak(*hardware, dtype_name(dtype)));
  } else {
    out = fmt::format("MFU             unknown: Kiln knows no hardware peak for {} in {}\n",
                      run.device.str(), dtype_name(dtype));
  }
  out += fmt::format(
      "                {:.1f}% of the measured matmul peak ({:.2f} GFLOP/s, the best {}^3 {} "
      "matmul here)\n",
      100.0 * r.mfu_of_measured_peak, r.measured_peak_flops / 1e9, peak_matmul_size(run.device),
      dtype_name(dtype));
  return out;
}

// "peak gradients  53376, 51520 bytes per rank": the most bytes each rank's gradient tensors
// held at once in the last timed step, as its strategy counted them (zero frees gradients during
// the step), or else what they hold after the step. A collective: rank 0 prints every rank's.
std::string peak_gradient_line(const AssembledRun& run) {
  int64_t held = 0;
  for (const auto& p : run.model->parameters()) {
    if (p.grad().defined()) held += static_cast<int64_t>(p.grad().nbytes());
  }
  const auto bytes = every_rank(run, run.parallel->peak_gradient_bytes().value_or(held));
  return fmt::format(
      "peak gradients  {} bytes per rank ({:.2f} MiB at most)\n", fmt::join(bytes, ", "),
      static_cast<double>(*std::max_element(bytes.begin(), bytes.end())) / (1 << 20));
}

// "memory live     1712128, 1002496 bytes per rank between steps" and "memory peak ...": what
// the allocator measured (core/util/allocation_meter.h) after the last timed step and at most
// within it. Collectives.
std::string measured_memory_lines(const AssembledRun& run, const AllocationCounts& memory) {
  const std::string where = run.device.is_cuda() ? "CUDA tensors" : "CPU tensors";
  return fmt::format(
      "memory live     {} bytes per rank between steps ({}, measured by the allocator)\n"
      "memory peak     {} bytes per rank within a step\n",
      fmt::join(every_rank(run, memory.live), ", "), where,
      fmt::join(every_rank(run, memory.peak), ", "));
}

// "training state  1651200, 1651200 bytes per rank": parameters, gradients and optimizer state
// each rank holds after the last timed step (fsdp, tensor and zero shard them). A collective.
std::string training_state_line(const AssembledRun& run) {
  return fmt::format(
      "training state  {} bytes per rank (parameters, gradients, optimizer)\n",
      fmt::join(every_rank(run, training_state_bytes(*run.model, *run.optimizer)), ", "));
}

// "parameters      55296 trainable, 5230080 frozen in 20920320 bytes" (an adapter freezes the
// model's own, core/api/adapter.h, and may keep them in bf16) and "optimizer state 442368 bytes
// per rank", the optimizer's tensors after the last timed step. A collective.
std::string parameter_lines(const AssembledRun& run) {
  const TrainableCounts counts = count_trainable(*run.model);
  return fmt::format(
      "parameters      {} trainable, {} frozen in {} bytes\n"
      "optimizer state {} bytes per rank\n",
      counts.trainable, counts.frozen, counts.frozen_bytes,
      fmt::join(every_rank(run, optimizer_state_bytes(*run.optimizer)), ", "));
}

}  // namespace

BenchResult run_bench(const ResolvedConfig& config, const BenchOptions& options) {
  if (options.steps < 1 || options.warmup < 0) {
    throw UserError("kiln bench needs --steps >= 1 and --warmup >= 0");
  }
  const std::string label =
      options.record ? resolve_bench_label(*options.record, build_git_commit(), config.hash()) : "";
  // Before assembly, so that the model's and optimizer's tensors are counted from the start.
  install_allocation_meter();
  AssembledRun run = assemble(config);
  const CpuFeatures cpu = read_cpu_features();
  BenchRecord r = identity(config, run, options, cpu);
  r.label = label;
  std::unique_ptr<RunStore> results = open_results(config, options);
  std::optional<BenchRecord> baseline;
  if (options.against) {
    baseline =
        require_bench_baseline(results->connection(), *options.against, r, options.allow_mismatch);
  }
  if (options.record) require_free_bench_label(results->connection(), r.label);

  const Timings t = time_steps(config, run, options);
  const std::string gradients = parameter_lines(run) + peak_gradient_line(run) +
                                training_state_line(run) + measured_memory_lines(run, t.memory);
  const double n = static_cast<double>(options.steps);
  r.ms = {t.phases.data_ms / n,
          t.phases.forward_ms / n,
          t.phases.backward_ms / n,
          t.phases.communication_ms / n,
          t.phases.optimizer_ms / n,
          t.logging_ms / n,
          t.step_ms / n};
  r.tokens_per_sec = static_cast<double>(run.batch_tokens) / (r.ms.step / 1000.0);
  const double flops_per_token = run.model->flops_per_token(run.train.seq_len);
  r.achieved_flops = flops_per_token * r.tokens_per_sec;
  const std::string mfu = measure_mfu(r, run, cpu);
  r.peak_memory_mb = peak_rss_mb();
  r.parameters = run.model_plan->parameters;
  r.active_parameters = run.model_plan->parameters - run.model_plan->inactive_parameters;

  std::string out = fmt::format(
      "kiln bench {}: model {} {:.2f}M parameters, {:.2f}M active per token | {} tokens/step ({} "
      "x {} x {} micro-steps) | "
      "{} | {} CPU threads | precision {}\n{}\n"
      "{} timed steps after {} warm-up; phases timed with a device sync at each boundary\n\n",
      config.experiment, config.type("model"), *r.parameters / 1e6, *r.active_parameters / 1e6,
      run.batch_tokens, run.train.micro_batch, run.train.seq_len, run.grad_accum, run.device.str(),
      at::get_num_threads(), config.type("precision"), cpu_runtime_report(), options.steps,
      options.warmup);
  out += fmt::format("{:<15} {:>10} {:>8}\n", "phase", "ms/step", "share");
  auto row = [&](const char* name, double ms) {
    out += fmt::format("{:<15} {:>10.3f} {:>7.1f}%\n", name, ms, 100.0 * ms / r.ms.step);
  };
  row("data", r.ms.data);
  row("forward", r.ms.forward);
  row("backward", r.ms.backward);
  row("communication", r.ms.communication);
  row("optimizer", r.ms.optimizer);
  row("logging", r.ms.logging);
  out += fmt::format("{:<15} {:>10.3f}\n\n", "step", r.ms.step);
  out += fmt::format(
      "tokens/s        {:.0f}\n"
      "model FLOPs     {:.3g} per token (6N + 12 L H Q T for gpt, N the active parameters) -> "
      "{:.2f} GFLOP/s achieved\n",
      r.tokens_per_sec, flops_per_token, r.achieved_flops / 1e9);
  out += mfu;
  out += fmt::format(
      "peak memory     {:.0f} MB resident (host)\n{}"
      "snapshot        {:.1f} ms for {:.1f} MB ({:.0f} MB/s), once per checkpoint.every steps\n",
      r.peak_memory_mb, gradients, t.snapshot_ms, static_cast<double>(t.snapshot_bytes) / 1e6,
      static_cast<double>(t.snapshot_bytes) / 1e6 / (t.snapshot_ms / 1000.0));
  if (baseline) out += "\n" + format_bench_comparison(*baseline, r);
  if (options.record) {
    insert_bench_record(results->connection(), r);
    out += fmt::format("\nrecorded as '{}' in {}: `kiln bench {} --against {}` compares with it\n",
                       r.label, results->path(), config.experiment, r.label);
  }
  return {r, out, precision_workload(config, run.train, *run.parallel)};
}

}  // namespace kiln
