#include "core/experiment.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "core/assemble.h"
#include "core/console.h"
#include "core/error.h"
#include "core/run_store.h"
#include "core/text.h"
#include "core/trainer.h"

namespace kiln {

namespace {

std::atomic<int> g_stop_signal{0};

void on_stop_signal(int signal) {
  if (g_stop_signal.exchange(signal) != 0) _exit(128 + signal);  // second signal: abort now
}

std::string default_run_name(const std::string& experiment) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  return std::filesystem::path(experiment).stem().string() + "-" + stamp;
}

// Run names become directory names under run.out_dir: nothing may climb out of it.
void check_run_name(const std::string& name) {
  bool bad = name.empty() || name.front() == '/' || name.size() > 200;
  for (const auto& part : split(name, '/'))
    bad = bad || part.empty() || part == "." || part == "..";
  for (unsigned char c : name)
    bad = bad || c < 0x20 || c == 0x7f || c == '\\';
  if (bad) {
    throw UserError(
        fmt::format("run name '{}' cannot be used: names become folders under "
                    "run.out_dir, so use letters, digits and . _ - = , / without "
                    "'..' or a leading '/'",
                    name));
  }
}

std::string git_commit() {
  std::string out;
  if (FILE* pipe = ::popen("git -C '" KILN_SOURCE_DIR "' rev-parse HEAD 2>/dev/null", "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, pipe)) out = buf;
    ::pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return out;
}

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

void set_run_name(ResolvedConfig& config, const std::string& name) {
  for (auto& section : config.sections) {
    if (section.name == "run") section.params.set("name", name);
  }
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool stop_requested() {
  return g_stop_signal.load() != 0;
}

RunSummary run_experiment(ResolvedConfig config) {
  std::string name = run_options(config).name;
  if (name.empty()) name = default_run_name(config.experiment);
  check_run_name(name);
  set_run_name(config, name);

  AssembledRun run = assemble(config);
  RunStore store(run.run.db);
  const int64_t run_id = store.create_run(
      NewRun{name, config.experiment, config.to_toml(), config.hash(), run.run.seed,
             run.parallel->world_size(), run.train.steps, git_commit(), host_name()});

  Console console(run.train.steps);
  console.line(fmt::format("run '{}' (id {}) in {} | config hash {}", name, run_id, store.path(),
                           config.hash()));
  console.line(fmt::format("model {}: {:.2f}M parameters, context {} | device {} | {} CPU threads",
                           config.type("model"), run.model->parameter_count() / 1e6,
                           run.model->context_length(), run.device.str(), at::get_num_threads()));
  console.line("data: " + run.train_data->describe());
  console.line(
      fmt::format("batch: {} tokens per step = micro_batch {} x seq_len {} x {} "
                  "micro-steps x {} rank(s) | {} steps",
                  run.batch_tokens, run.train.micro_batch, run.train.seq_len, run.grad_accum,
                  run.parallel->world_size(), run.train.steps));
  console.legend();

  RunSummary summary{run_id, name, "completed", 0, 0};
  double train_seconds = 0;
  try {
    Trainer trainer(run);
    for (int64_t step = 1; step <= run.train.steps; ++step) {
      if (stop_requested()) {
        summary.status = "interrupted";
        break;
      }
      StepStats stats = trainer.train_step(step);
      train_seconds += stats.dt_ms / 1000.0;
      store.add_metric(run_id, MetricRow{stats.step, stats.loss, stats.lr, stats.grad_norm,
                                         stats.tokens_per_sec, stats.dt_ms, stats.tokens_seen});
      const bool last = step == run.train.steps;
      console.step(stats, step == 1 || last || step % run.train.log_every == 0);
      if (run.eval.every > 0 && (step % run.eval.every == 0 || last)) {
        const double loss = trainer.evaluate(*run.val_data, run.eval.steps);
        store.add_eval(run_id, EvalRow{step, "val", loss});
        console.eval(step, "val", loss);
      }
      summary.steps_done = step;
      summary.final_loss = stats.loss;
    }
  } catch (const c10::Error& e) {
    std::string message = e.what_without_backtrace();
    store.finish_run(run_id, "failed", message);
    throw std::runtime_error("LibTorch: " + message);
  } catch (const std::exception& e) {
    store.finish_run(run_id, "failed", e.what());
    throw;
  }
  store.finish_run(run_id, summary.status);
  console.line(fmt::format(
      "{} {} of {} steps in {} | final loss {:.6f} | run store {:.1f} ms "
      "({:.3f}% of step time)",
      summary.status, summary.steps_done, run.train.steps, format_duration(train_seconds),
      summary.final_loss, store.seconds_spent() * 1000.0,
      train_seconds > 0 ? 100.0 * store.seconds_spent() / train_seconds : 0));
  return summary;
}

}  // namespace kiln
