#include "core/app/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <torch/cuda.h>

#include "core/checkpoint/snapshot.h"
#include "core/store/run_paths.h"
#include "core/store/run_store.h"
#include "core/train/assemble.h"
#include "core/train/console.h"
#include "core/train/session.h"
#include "core/train/trainer.h"
#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

// FLOP/s of the best of a few n x n x n matmuls in `dtype`: the ceiling MFU is measured against.
double measured_peak_flops(const torch::Device& device, at::ScalarType dtype) {
  const int64_t n = device.is_cuda() ? 8192 : 1024;
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

}  // namespace

std::string run_bench(const ResolvedConfig& config, const BenchOptions& options) {
  if (options.steps < 1 || options.warmup < 0) {
    throw UserError("kiln bench needs --steps >= 1 and --warmup >= 0");
  }
  AssembledRun run = assemble(config);
  Trainer trainer(run);
  ScratchDir scratch;
  RunStore store(scratch / "bench.db");
  const int64_t run_id =
      store.create_run(NewRun{"bench", config.experiment, config.to_toml(), config.hash(),
                              run.options.seed, 1, options.steps, "", "", "", "", ""});
  Console console(options.steps);

  for (int64_t step = 1; step <= options.warmup; ++step)
    trainer.train_step(step);
  trainer.set_profiling(true);
  PhaseTimes total;
  double step_ms = 0, logging_ms = 0;
  for (int64_t step = 1; step <= options.steps; ++step) {
    StepStats s = trainer.train_step(options.warmup + step);
    const PhaseTimes& p = trainer.last_phases();
    total.data_ms += p.data_ms;
    total.forward_ms += p.forward_ms;
    total.backward_ms += p.backward_ms;
    total.communication_ms += p.communication_ms;
    total.optimizer_ms += p.optimizer_ms;
    step_ms += s.dt_ms;
    // What a real run adds per step: the metrics row and the console line.
    const auto start = Clock::now();
    store.add_metric(run_id, metric_row(s, 1));
    std::string line = console.format_step(s);
    logging_ms += ms_since(start);
  }
  const auto flush_start = Clock::now();
  store.flush();
  logging_ms += ms_since(flush_start);

  const auto snapshot_start = Clock::now();
  SnapshotState state;
  state.step = options.steps;
  const RunPaths paths = RunPaths::in_folder(scratch.str(), "bench");
  write_snapshot(paths.snapshots(), "step_bench", *run.model, *run.optimizer, state);
  const double snapshot_ms = ms_since(snapshot_start);
  uintmax_t snapshot_bytes = 0;
  for (const auto& f : std::filesystem::directory_iterator(paths.snapshot("step_bench"))) {
    snapshot_bytes += f.file_size();
  }

  const double n = static_cast<double>(options.steps);
  const double per_step = step_ms / n;
  const double tokens_per_sec = static_cast<double>(run.batch_tokens) / (per_step / 1000.0);
  const double flops_per_token = run.model->flops_per_token(run.train.seq_len);
  const at::ScalarType dtype = run.precision->compute_dtype();
  const double peak = measured_peak_flops(run.device, dtype);
  const double achieved = flops_per_token * tokens_per_sec;

  std::string out = fmt::format(
      "kiln bench {}: model {} {:.2f}M parameters | {} tokens/step ({} x {} x {} micro-steps) | "
      "{} | {} CPU threads | precision {}\n"
      "{} timed steps after {} warm-up; phases timed with a device sync at each boundary\n\n",
      config.experiment, config.type("model"),
      static_cast<double>(run.model->parameter_count()) / 1e6, run.batch_tokens,
      run.train.micro_batch, run.train.seq_len, run.grad_accum, run.device.str(),
      at::get_num_threads(), config.type("precision"), options.steps, options.warmup);
  out += fmt::format("{:<15} {:>10} {:>8}\n", "phase", "ms/step", "share");
  auto row = [&](const char* name, double ms) {
    out += fmt::format("{:<15} {:>10.3f} {:>7.1f}%\n", name, ms / n, 100.0 * ms / step_ms);
  };
  row("data", total.data_ms);
  row("forward", total.forward_ms);
  row("backward", total.backward_ms);
  row("communication", total.communication_ms);
  row("optimizer", total.optimizer_ms);
  row("logging", logging_ms);
  out += fmt::format("{:<15} {:>10.3f}\n\n", "step", per_step);
  out += fmt::format(
      "tokens/s        {:.0f}\n"
      "model FLOPs     {:.3g} per token (6N + 12 L H Q T for gpt) -> {:.2f} GFLOP/s achieved\n"
      "peak            {:.2f} GFLOP/s (best {} matmul on this device)\n"
      "MFU             {:.1f}%\n"
      "peak memory     {:.0f} MB resident (host)\n"
      "snapshot        {:.1f} ms for {:.1f} MB ({:.0f} MB/s), once per checkpoint.every steps\n",
      tokens_per_sec, flops_per_token, achieved / 1e9, peak / 1e9, c10::toString(dtype),
      100.0 * achieved / peak, peak_rss_mb(), snapshot_ms,
      static_cast<double>(snapshot_bytes) / 1e6,
      static_cast<double>(snapshot_bytes) / 1e6 / (snapshot_ms / 1000.0));
  return out;
}

}  // namespace kiln
