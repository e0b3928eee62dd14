#include "core/experiment.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>
#include <streambuf>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>
#include <torch/serialize/output-archive.h>

#include "core/assemble.h"
#include "core/console.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/run_store.h"
#include "core/snapshot.h"
#include "core/text.h"
#include "core/trainer.h"

namespace kiln {

namespace {

std::atomic<int> g_stop_signal{0};

void on_stop_signal(int signal) {
  if (g_stop_signal.exchange(signal) != 0) _exit(128 + signal);  // second signal: abort now
}

// Keys a resume may change: they alter how long the run goes and what it records, not the
// model, the data or the update rule, so the snapshot still describes the same run.
const char* const kResumableKeys[] = {"train.steps", "train.log_every",  "eval.every",
                                      "eval.steps",  "checkpoint.every", "checkpoint.keep",
                                      "run.threads", "run.device",       "train.on_nonfinite"};

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
  if (!is_contained_name(name)) {
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

std::map<std::string, std::string> flatten(const ResolvedConfig& config) {
  std::map<std::string, std::string> out;
  for (const auto& section : config.sections) {
    if (!section.type.empty()) out[section.name + ".type"] = section.type;
    for (const auto& [key, value] : section.params.values()) {
      out[section.name + "." + key] = format_value(value);
    }
  }
  return out;
}

// "key: old -> new" for every key that differs; `refused` gets those a resume may not change.
std::vector<std::string> config_changes(const ResolvedConfig& before, const ResolvedConfig& after,
                                        std::vector<std::string>& refused) {
  auto a = flatten(before), b = flatten(after);
  std::vector<std::string> keys;
  for (const auto& [k, _] : a)
    keys.push_back(k);
  for (const auto& [k, _] : b) {
    if (!a.count(k)) keys.push_back(k);
  }
  std::vector<std::string> changes;
  for (const auto& key : keys) {
    const std::string old_value = a.count(key) ? a[key] : "(none)";
    const std::string new_value = b.count(key) ? b[key] : "(none)";
    if (old_value == new_value) continue;
    changes.push_back(fmt::format("{}: {} -> {}", key, old_value, new_value));
    // Snapshots are whole whatever the strategy, so a run may go on with another one (the global
    // batch stays train.batch_tokens; a strategy that cannot keep it says so).
    const bool parallel = key.rfind("parallel.", 0) == 0;
    if (!parallel && std::find(std::begin(kResumableKeys), std::end(kResumableKeys), key) ==
                         std::end(kResumableKeys)) {
      refused.push_back(key);
    }
  }
  return changes;
}

// Bytes of `optimizer` serialized, counted without keeping them.
int64_t serialized_bytes(const torch::optim::Optimizer& optimizer) {
  struct Counter : std::streambuf {
    int64_t count = 0;
    std::streamsize xsputn(const char*, std::streamsize n) override {
      count += n;
      return n;
    }
    int_type overflow(int_type c) override {
      ++count;
      return c;
    }
  } counter;
  std::ostream out(&counter);
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  archive.save_to(out);
  return counter.count;
}

// The stored config with the sections whose plugin `overrides` switch (--set parallel.type=single)
// left out: their stored keys belong to the old plugin, and the new one starts from its defaults.
std::string without_switched_sections(const std::string& stored_toml, const ResolvedConfig& stored,
                                      const std::vector<std::string>& overrides) {
  toml::table table = toml::parse(stored_toml);
  for (const auto& assignment : overrides) {
    const auto eq = assignment.find('=');
    const auto dot = assignment.find('.');
    if (eq == std::string::npos || dot > eq || assignment.substr(dot + 1, eq - dot - 1) != "type")
      continue;
    const std::string section = assignment.substr(0, dot);
    std::string type = assignment.substr(eq + 1);
    if (type.size() >= 2 && (type.front() == '"' || type.front() == '\'')) {
      type = type.substr(1, type.size() - 2);
    }
    if (table.contains(section) && stored.type(section) != type) table.erase(section);
  }
  std::ostringstream out;
  out << table;
  return out.str();
}

// The training loop around a Trainer: metrics into the store, console lines, periodic eval,
// snapshots (regular, best, on interruption) and the final status. Every rank runs it; only
// rank 0 (the one given a store) prints, records and writes snapshots.
class Session {
 public:
  Session(AssembledRun& run, RunStore* store, int64_t run_id, std::string name)
      : run_(run),
        store_(store),
        run_id_(run_id),
        name_(std::move(name)),
        dir_(snapshots_dir(run.run.out_dir, name_)),
        trainer_(run),
        console_(run.train.steps) {}

  const std::string& snapshot_dir() const { return dir_; }
  Console& console() { return console_; }

  // Continues after `snapshot`: weights, optimizer, data position, RNG, counters.
  void restore(const SnapshotRef& snapshot) {
    SnapshotState state =
        load_snapshot(snapshot, *run_.model, run_.optimizer.get(), /*restore_rng=*/true);
    run_.parallel->shard_state(*run_.model, *run_.optimizer);
    if (state.data_positions.empty()) {
      throw UserError(
          fmt::format("snapshot '{}' holds no data position: it is damaged; resume "
                      "from an earlier one (kiln runs show)",
                      snapshot.path));
    }
    // A position names the next global batch (rank 0's window in it; rank r reads r windows
    // further), so it holds at any world size.
    run_.train_data->seek(state.data_positions.front());
    trainer_.set_tokens_seen(state.tokens_seen);
    best_val_ = state.best_val_loss;
    try {
      run_.precision->load_state(state.precision.get<std::map<std::string, double>>());
    } catch (const nlohmann::json::exception& e) {
      throw UserError(
          fmt::format("snapshot '{}': its precision state is not a map of numbers "
                      "({}): resume from an earlier snapshot",
                      snapshot.path, e.what()));
    }
    start_step_ = state.step;
    last_snapshot_step_ = state.step;
  }

  void print_header() {
    if (!store_) return;
    const auto& config = run_.config;
    console_.line(fmt::format("run '{}' (id {}) in {} | config hash {}", name_, run_id_,
                              store_->path(), config.hash()));
    console_.line(
        fmt::format("model {}: {:.2f}M parameters, context {} | device {} | {} CPU threads",
                    config.type("model"), static_cast<double>(run_.model->parameter_count()) / 1e6,
                    run_.model->context_length(), run_.device.str(), at::get_num_threads()));
    console_.line("data: " + run_.train_data->describe());
    console_.line(fmt::format(
        "batch: {} tokens per step = micro_batch {} x seq_len {} x {} micro-steps x {} rank(s) | "
        "{} steps",
        run_.batch_tokens, run_.train.micro_batch, run_.train.seq_len, run_.grad_accum,
        run_.parallel->world_size(), run_.train.steps));
    if (start_step_ > 0) {
      console_.line(fmt::format("resuming after step {} ({} tokens seen)", start_step_,
                                trainer_.tokens_seen()));
    }
    console_.legend();
  }

  RunSummary train() {
    RunSummary summary{run_id_, name_, "completed", start_step_, 0};
    double train_seconds = 0;
    try {
      for (int64_t step = start_step_ + 1; step <= run_.train.steps; ++step) {
        StepStats stats = trainer_.train_step(step);
        train_seconds += stats.dt_ms / 1000.0;
        if (step == start_step_ + 1) report_optimizer_state();
        if (store_) store_->add_metric(run_id_, metric_row(stats, run_.parallel->world_size()));
        if (stats.nonfinite) handle_nonfinite(stats);
        const bool last = step == run_.train.steps;
        if (store_) {
          const bool print = step == start_step_ + 1 || last || step % run_.train.log_every == 0;
          console_.step(stats, print);
          if (print && stats.bubble) console_.line(pipeline_line(stats));
        }
        summary.steps_done = step;
        summary.final_loss = stats.loss;
        if (run_.eval.every > 0 && (step % run_.eval.every == 0 || last)) evaluate(step);
        if (stop_requested()) {
          summary.status = "interrupted";
          snapshot(step, false);
          break;
        }
        const int64_t every = run_.checkpoint.every;
        if (every > 0 && (step % every == 0 || last)) snapshot(step, false);
      }
      if (summary.status == "completed") test_at_end(summary.steps_done);
    } catch (const c10::Error& e) {
      std::string message = e.what_without_backtrace();
      if (store_) store_->finish_run(run_id_, "failed", message);
      throw std::runtime_error("LibTorch: " + message);
    } catch (const std::exception& e) {
      if (store_) store_->finish_run(run_id_, "failed", e.what());
      throw;
    }
    if (!store_) return summary;
    store_->finish_run(run_id_, summary.status);
    console_.line(fmt::format(
        "{} {} of {} steps; {} of training this session | final loss {:.6f} | run store {:.1f} "
        "ms ({:.3f}% of step time) | snapshots {:.1f} ms",
        summary.status, summary.steps_done, run_.train.steps, format_duration(train_seconds),
        summary.final_loss, store_->seconds_spent() * 1000.0,
        train_seconds > 0 ? 100.0 * store_->seconds_spent() / train_seconds : 0.0,
        snapshot_seconds_ * 1000.0));
    return summary;
  }

 private:
  // The seed recipe's closing number: loss and perplexity over the whole test split.
  void test_at_end(int64_t step) {
    if (!run_.test_data) return;
    const double loss = trainer_.evaluate(*run_.test_data, run_.test_data->batches_per_pass());
    if (!store_) return;
    store_->add_eval(run_id_, EvalRow{step, "test", loss, ""});
    console_.eval(step, "test", loss);
  }

  void evaluate(int64_t step) {
    const double loss = trainer_.evaluate(*run_.val_data, run_.eval.steps);
    if (store_) {
      store_->add_eval(run_id_, EvalRow{step, "val", loss, ""});
      console_.eval(step, "val", loss);
    }
    if (!best_val_ || loss < *best_val_) {
      best_val_ = loss;
      if (run_.checkpoint.every > 0) snapshot(step, true);
    }
  }

  // "  pipeline: stage compute 10.1 | 9.7 ms, bubble 38%, live micro-batches 2 | 1": each
  // stage's forward and backward time in the step, the share of the stages' pass time spent
  // waiting, and the most micro-batches whose activations each stage held at once.
  static std::string pipeline_line(const StepStats& stats) {
    return fmt::format("  pipeline: stage compute {:.1f} ms, bubble {:.0f}%, live micro-batches {}",
                       fmt::join(stats.stage_compute_ms, " | "), 100 * *stats.bubble,
                       fmt::join(stats.stage_peak_live, " | "));
  }

  // The step was not applied (Trainer); abort or say so, as train.on_nonfinite asks.
  void handle_nonfinite(const StepStats& stats) {
    const std::string what = fmt::format(
        "step {}: the gradients are not finite (norm {}, loss {}), so the update was not applied",
        stats.step, std::fabs(stats.grad_norm), std::fabs(stats.loss));  // "nan", not "-nan"
    if (!run_.train.abort_on_nonfinite) {
      if (store_) console_.line(what + " (train.on_nonfinite = \"skip\")");
      return;
    }
    const std::string from = last_snapshot_step_ > 0
                                 ? fmt::format("its last snapshot (step {})", last_snapshot_step_)
                                 : std::string("step 0 (it has no snapshot)");
    throw DivergedError(fmt::format(
        "{} and the run stopped (train.on_nonfinite = \"abort\"): `kiln resume {}` continues "
        "from {}; add --set train.on_nonfinite=skip to step over such batches, or start again "
        "with a lower optimizer.lr or a train.grad_clip",
        what, name_, from));
  }

  // The optimizer's state, as bytes serialized, on each rank once the first step created it:
  // what sharding it (parallel.type = "zero") saves.
  void report_optimizer_state() {
    const int world = run_.parallel->world_size();
    std::vector<double> mine(static_cast<size_t>(world), 0.0);
    mine[static_cast<size_t>(run_.parallel->rank())] =
        static_cast<double>(serialized_bytes(*run_.optimizer));
    at::Tensor all = run_.parallel->sum(at::tensor(mine, at::kDouble).to(run_.device)).cpu();
    if (!store_) return;
    std::string sizes;
    for (int r = 0; r < world; ++r) {
      sizes += fmt::format("{}{:.2f}", r ? ", " : "", all[r].item<double>() / (1 << 20));
    }
    console_.line(fmt::format("optimizer state per rank: {} MiB", sizes));
  }

  void snapshot(int64_t step, bool best) {
    // Collective: ranks that hold a shard of the optimizer state send it to rank 0 first.
    run_.parallel->gather_state(*run_.model, *run_.optimizer);
    if (store_) write_snapshot_files(step, best);
    run_.parallel->shard_state(*run_.model, *run_.optimizer);
  }

  // Rank 0 only: ranks hold the same weights and data position.
  void write_snapshot_files(int64_t step, bool best) {
    const auto start = std::chrono::steady_clock::now();
    SnapshotState state;
    state.step = step;
    state.tokens_seen = trainer_.tokens_seen();
    state.world_size = run_.parallel->world_size();
    state.data_positions.assign(static_cast<size_t>(state.world_size), run_.train_data->position());
    state.best_val_loss = best_val_;
    state.precision = run_.precision->state();
    state.config_toml = run_.config.to_toml();
    state.config_hash = run_.config.hash();
    const std::string label = best ? best_label(step) : regular_label(step);
    // Rows up to the snapshot's step are committed before the snapshot exists: a resume from it
    // then never lacks one.
    store_->flush();
    write_snapshot(dir_, label, *run_.model, *run_.optimizer, state);
    store_->add_snapshot(run_id_, step, label, dir_ + "/" + label);
    last_snapshot_step_ = step;
    for (const auto& removed : prune_snapshots(dir_, run_.checkpoint.keep)) {
      store_->remove_snapshot(run_id_, removed.label);
    }
    snapshot_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  AssembledRun& run_;
  RunStore* store_;  // null on ranks other than 0
  int64_t run_id_;
  std::string name_;
  std::string dir_;
  Trainer trainer_;
  Console console_;
  int64_t start_step_ = 0;
  std::optional<double> best_val_;
  double snapshot_seconds_ = 0;
  int64_t last_snapshot_step_ = 0;  // this session's or the one resumed from
};

// A worker that torchrun or kiln launch started again after a failure continues its run.
bool restarted_worker() {
  const char* count = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return count && std::atoi(count) > 0;
}

std::string lock_path(const RunOptions& run, const std::string& name) {
  return (std::filesystem::path(run.out_dir) / name / "lock").string();
}

std::string busy_message(const std::string& name) {
  return fmt::format(
      "run '{}' is being trained by another kiln process right now: wait for it, "
      "or stop it first",
      name);
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

RunSummary run_experiment(ResolvedConfig config, bool restart) {
  std::string name = run_options(config).name;
  if (name.empty()) name = default_run_name(config.experiment);
  check_run_name(name);
  set_run_name(config, name);
  if (restarted_worker() && !restart) {
    // Decided before assembly, whose rendezvous every rank passes before rank 0 can create the
    // run: so all ranks see the same store and take the same branch.
    std::optional<RunInfo> existing = RunStore(run_options(config).db).find_run(name);
    if (existing && existing->status != "completed") {
      return resume_run(run_options(config).db, name, {});
    }
  }

  AssembledRun run = assemble(config);
  if (run.parallel->rank() != 0) {
    Session session(run, nullptr, 0, name);
    return session.train();
  }
  RunStore store(run.run.db);
  FileLock lock(lock_path(run.run, name), busy_message(name));
  if (auto existing = store.find_run(name)) {
    if (!restart && existing->status != "completed") {
      throw UserError(
          fmt::format("run '{}' already exists and is {}: continue it with `kiln "
                      "resume {}`, or start it afresh with --restart",
                      name, existing->status, name));
    }
    if (!restart) {
      throw UserError(
          fmt::format("a run named '{}' already exists (completed) in '{}': pick "
                      "another --name, or replace it with --restart",
                      name, store.path()));
    }
    store.delete_run(existing->id);
    std::filesystem::remove_all(snapshots_dir(run.run.out_dir, name));
  }
  const int64_t run_id = store.create_run(NewRun{
      name, config.experiment, config.to_toml(), config.hash(), run.run.seed,
      run.parallel->world_size(), run.train.steps, git_commit(), host_name(), run.run.sweep});
  Session session(run, &store, run_id, name);
  session.print_header();
  return session.train();
}

RunSummary resume_run(const std::string& db, const std::string& name_or_id,
                      const std::vector<std::string>& overrides) {
  RunInfo info;
  if (!std::filesystem::exists(db)) {
    throw UserError(fmt::format("no run store at '{}': pass the --db that `kiln run` used", db));
  }
  {
    RunStore lookup(db);
    auto found = lookup.find_run(name_or_id);
    if (!found) {
      throw UserError(
          fmt::format("no run '{}' in '{}': `sqlite3 {} 'select id, name, status "
                      "from runs'` lists them",
                      name_or_id, db, db));
    }
    info = *found;
  }
  if (info.status == "completed" && overrides.empty()) {
    throw UserError(
        fmt::format("run '{}' is already completed: to train it further, resume "
                    "with --set train.steps=N",
                    info.name));
  }
  const std::string source = fmt::format("run '{}' (stored config)", info.name);
  ResolvedConfig stored = load_config_text(info.config_toml, source, {});
  ResolvedConfig config = load_config_text(
      without_switched_sections(info.config_toml, stored, overrides), source, overrides);
  config.experiment = stored.experiment = info.name;
  std::vector<std::string> refused;
  std::vector<std::string> changes = config_changes(stored, config, refused);
  if (!refused.empty()) {
    throw UserError(
        fmt::format("resume cannot change {}: they alter the model, data or "
                    "optimisation the snapshot was taken with; start a new run "
                    "instead (resumable: {})",
                    fmt::join(refused, ", "), fmt::join(kResumableKeys, ", ")));
  }

  AssembledRun run = assemble(config);
  const bool main_rank = run.parallel->rank() == 0;
  std::unique_ptr<RunStore> store = main_rank ? std::make_unique<RunStore>(db) : nullptr;
  std::unique_ptr<FileLock> lock =
      main_rank ? std::make_unique<FileLock>(lock_path(run.run, info.name), busy_message(info.name))
                : nullptr;
  Session session(run, store.get(), info.id, info.name);
  auto say = [&](const std::string& line) {
    if (main_rank) session.console().line(line);
  };
  auto snapshots = list_snapshots(session.snapshot_dir());
  int64_t from_step = 0;
  if (snapshots.empty()) {
    say("no snapshot yet: the run starts again from step 0");
  } else {
    SnapshotRef latest = select_snapshot(session.snapshot_dir(), "latest",
                                         [&](const std::string& w) { say("warning: " + w); });
    session.restore(latest);
    from_step = latest.step;
    if (from_step >= run.train.steps) {
      throw UserError(
          fmt::format("run '{}' already has a snapshot at step {} of {}: raise "
                      "train.steps with --set to train further",
                      info.name, from_step, run.train.steps));
    }
  }
  if (store) {
    store->reopen_run(info.id, from_step, join(changes, "; "), config.to_toml(), config.hash());
  }
  for (const auto& change : changes)
    say("resume changes " + change);
  session.print_header();
  return session.train();
}

}  // namespace kiln
