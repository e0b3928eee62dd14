#include "core/train/session.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/distributed/distributed.h"
#include "core/store/runs/run_environment.h"
#include "core/store/runs/rung_probes.h"
#include "core/store/tensorboard/run_log.h"
#include "core/train/cooldown_probe.h"
#include "core/train/rank_figures.h"
#include "core/train/run_header.h"
#include "core/train/skipped_updates.h"
#include "core/train/task_suite.h"
#include "core/util/error.h"
#include "core/util/fault.h"
#include "core/util/freed_memory.h"
#include "core/util/stop_signal.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// What an eval's row and line say it counted: the counted tokens of masked data that counted
// some; nothing (NULL in the store) otherwise.
std::optional<int64_t> counted_tokens(const DataSource& data, const EvalResult& result) {
  if (!data.masks_loss() || result.tokens <= 0) return std::nullopt;
  return result.tokens;
}

}  // namespace

Session::Session(AssembledRun& run, RunPaths paths, SnapshotOwner owner, RunStore* store,
                 int64_t run_id)
    : run_(run),
      store_(store),
      run_id_(run_id),
      name_(paths.name()),
      folder_(paths.folder()),
      trainer_(run),
      console_(run.train.steps),
      evals_(run.eval, run.train.steps),
      snapshots_(run.checkpoint, run.train.steps,
                 SnapshotParts{*run.model, *run.optimizer, *run.parallel}, std::move(paths),
                 std::move(owner), store, run_id) {
  // Rows a server that went away never took are kept beside the snapshots, not lost.
  if (store_)
    store_->keep_unstored_rows_in(run_id_, RunPaths::in_folder(folder_, name_).unstored_rows());
}

void Session::restore(const SnapshotRef& snapshot) {
  SnapshotState state = snapshots_.restore(snapshot);
  if (state.data_positions.empty()) {
    throw UserError(
        fmt::format("snapshot '{}' holds no data position: it is damaged; resume "
                    "from an earlier one (kiln runs show)",
                    snapshot.path));
  }
  // Each rank takes its own position and RNG states back (SnapshotPolicy::restore). A position
  // names the next global batch (rank 0's window in it; rank r reads r windows further), so
  // rank 0's holds at any world size; RNG streams do not map from one world size to another.
  const size_t rank = static_cast<size_t>(run_.parallel->rank());
  run_.train_data->seek(state.data_positions.at(rank < state.data_positions.size() ? rank : 0));
  const size_t world = static_cast<size_t>(run_.parallel->world_size());
  if (store_ && state.rng_by_rank.size() != world) {
    console_.line(fmt::format(
        "note: snapshot '{}' holds the RNG states of {} rank(s) and this run has {}: ranks "
        "without their own continue from rank 0's LibTorch generator (dropout masks and the data "
        "order do not depend on it)",
        snapshot.path, state.rng_by_rank.size(), world));
  }
  trainer_.set_tokens_seen(state.tokens_seen);
  try {
    run_.precision->load_state(state.precision.get<std::map<std::string, double>>());
  } catch (const nlohmann::json::exception& e) {
    throw UserError(
        fmt::format("snapshot '{}': its precision state is not a map of numbers "
                    "({}): resume from an earlier snapshot",
                    snapshot.path, e.what()));
  }
  start_step_ = state.step;
}

void Session::print_header() {
  if (!store_) return;
  write_run_environment(store_->connection(), run_id_, run_environment(run_));
  const HeaderFacts facts{name_,   run_id_,     store_->path(),
                          folder_, start_step_, trainer_.tokens_seen()};
  for (const std::string& line : header_lines(run_, facts))
    console_.line(line);
  const std::vector<int64_t>& read = snapshots_.bytes_read();
  if (std::any_of(read.begin(), read.end(), [](int64_t bytes) { return bytes > 0; })) {
    console_.line(fmt::format("snapshot of step {}: bytes of tensors read by rank: {}", start_step_,
                              fmt::join(read, " ")));
  }
  console_.legend(run_.train_data->masks_loss());
}

SessionOutcome Session::train() {
  SessionOutcome outcome{run_id_, name_, "completed", start_step_, 0};
  // An error after a second stop signal (a peer that stopped at once), or a lost peer (killed,
  // hung, its node gone), leaves a run stopped from outside: it resumes from its last snapshot.
  auto failed = [](const std::exception& e) {
    const bool lost = dynamic_cast<const PeerLostError*>(&e) != nullptr;
    return StopSignal::abandoned() || lost ? "interrupted" : "failed";
  };
  std::unique_ptr<TensorBoardLog> tensorboard;  // hears every row up to the run's closing commit
  keep_freed_memory();                          // the next step reuses this step's pages
  try {
    tensorboard = open_tensorboard();
    train_steps(outcome);
    if (evals_.final_test(outcome.status == "completed")) test_at_end(outcome.steps_done);
    finish_background_save(outcome.steps_done, /*wait=*/true);  // interrupted runs resume from it
    if (store_) {
      updates_ = store_->count_updates(run_id_);
      if (outcome.status == "completed") require_an_applied_update(updates_);
    }
  } catch (const SnapshotAbandoned&) {
    outcome.status = "interrupted";
    say_abandoned();
  } catch (const c10::Error& e) {
    std::string message = e.what_without_backtrace();
    finish_background_save_after_error();
    if (store_) store_->finish_run(run_id_, failed(e), message);
    throw std::runtime_error("LibTorch: " + message);
  } catch (const std::exception& e) {
    finish_background_save_after_error();
    if (store_) store_->finish_run(run_id_, failed(e), e.what());
    throw;
  }
  if (!store_) return outcome;
  store_->finish_run(run_id_, outcome.status == "paused" ? "interrupted" : outcome.status);
  print_closing(outcome);
  return outcome;
}

// Rank 0 with metrics.tensorboard set: the event file this session appends to.
std::unique_ptr<TensorBoardLog> Session::open_tensorboard() {
  const std::string dir = metrics_options(run_.config).tensorboard;
  if (!store_ || dir.empty()) return nullptr;
  return std::make_unique<TensorBoardLog>(
      *store_, run_id_, dir, name_, run_.config.to_toml(), start_step_,
      [this](const std::string& warning) { console_.line("warning: " + warning); });
}

void Session::train_steps(SessionOutcome& outcome) {
  for (int64_t step = start_step_ + 1; step <= run_.train.steps; ++step) {
    StepStats stats = trainer_.train_step(step);
    train_seconds_ += stats.dt_ms / 1000.0;
    if (step == start_step_ + 1) {  // the first step created the optimizer's state
      const std::string line = state_per_rank_line(run_);
      if (store_) console_.line(line);
    }
    // A snapshot step waits for a background save still in flight; its row says how long.
    const bool snapshot_step = snapshots_.due(step, /*interrupted=*/false);
    const std::optional<double> snapshot_wait = finish_background_save(step, snapshot_step);
    LayerMeasures measures = run_.model->take_layer_measures(
        [this](const at::Tensor& tallies) { return run_.parallel->sum(tallies); });
    if (store_) {
      if (snapshot_step && snapshot_wait) measures.emplace_back("snapshot_wait_s", *snapshot_wait);
      store_->add_metric(run_id_, metric_row(stats, run_.parallel->world_size(),
                                             run_.train_data->source_names(), std::move(measures)));
    }
    if (stats.nonfinite) {  // the update was not applied: abort or say so
      const std::string line =
          nonfinite_step_line(stats, run_.train.abort_on_nonfinite, name_, snapshots_.last_step());
      if (store_) console_.line(line);
    }
    if (store_) print_step(stats);
    outcome.steps_done = step;
    outcome.final_loss = stats.loss;
    if (evals_.due(step)) evaluate(step);
    if (evals_.tasks_due(step)) score_tasks(step);
    const bool interrupted = StopSignal::requested();
    if (StopSignal::abandoned()) {  // a second signal: the user will not wait for a snapshot
      outcome.status = "interrupted";
      say_abandoned();
      return;
    }
    const bool paused = step == pause_at_;
    if (snapshots_.due(step, interrupted || paused)) snapshot(step, /*best=*/false);
    if (interrupted || paused) {
      outcome.status = interrupted ? "interrupted" : "paused";
      return;
    }
  }
}

void Session::probe_cooldown(int64_t steps) {
  const int64_t from = pause_at_;
  run_.schedule = cooldown_schedule(run_.config, configured_lr(*run_.optimizer), from, steps);
  bool diverged = false;
  for (int64_t step = from + 1; step <= from + steps && !diverged; ++step) {
    diverged = trainer_.train_step(step).nonfinite;
    fault_point("probe.unscored");
    if (StopSignal::requested()) return;
  }
  const double loss = diverged ? INFINITY : trainer_.evaluate(*run_.val_data, run_.eval.steps).loss;
  if (!store_) return;
  write_rung_probe(store_->connection(), run_id_, from, RungProbe{steps, loss});
  console_.line(fmt::format(
      "rung probe at step {}: val_loss {:.6f} after {} steps of cooldown (a branch, thrown "
      "away: the run stays at step {})",
      from, loss, steps, from));
}

void Session::pause_after(int64_t step) {
  pause_at_ = step;
  evals_ = EvalPolicy(run_.eval, run_.train.steps, step);
}

// Every train.log_every steps, and the session's first and the run's last step.
void Session::print_step(const StepStats& stats) {
  const int64_t step = stats.step;
  const bool print =
      step == start_step_ + 1 || step == run_.train.steps || step % run_.train.log_every == 0;
  console_.step(stats, print);
}

void Session::evaluate(int64_t step) {
  const EvalResult result = trainer_.evaluate(*run_.val_data, run_.eval.steps);
  if (store_) {
    const std::optional<int64_t> counted = counted_tokens(*run_.val_data, result);
    store_->add_eval(run_id_, EvalRow{step, "val", result.loss, "", counted});
    console_.eval(step, "val", result.loss, counted.value_or(0));
  }
  if (snapshots_.best_due(result.loss)) snapshot(step, /*best=*/true);
  return_freed_memory();
}

void Session::score_tasks(int64_t step) {
  if (!run_.tasks) return;
  const AveragedIterateScope averaged(run_.optimizer.get());
  for (const TaskResult& result : run_.tasks->score(run_, {run_.eval.task_batch})) {
    if (!store_) continue;
    store_->add_task_scores(run_id_, task_score_rows(result, step, ""));
    console_.line(fmt::format("step {}: {}", step, task_line(result)));
  }
  return_freed_memory();
}

// The seed recipe's closing number: loss and perplexity over the whole test split.
void Session::test_at_end(int64_t step) {
  if (!run_.test_data) return;
  const EvalResult result = trainer_.evaluate(*run_.test_data, run_.test_data->batches_per_pass());
  if (!store_) return;
  const std::optional<int64_t> counted = counted_tokens(*run_.test_data, result);
  store_->add_eval(run_id_, EvalRow{step, "test", result.loss, "", counted});
  console_.eval(step, "test", result.loss, counted.value_or(0));
}

void Session::say_abandoned() {
  if (!store_) return;
  const int64_t last = snapshots_.last_step();
  console_.line(fmt::format(
      "a second stop signal: stopping without a snapshot of this step; `kiln resume {}` "
      "continues from {}",
      name_, last > 0 ? fmt::format("its last snapshot (step {})", last) : "step 0"));
}

// What the snapshot policy cannot know: where the run is and what it was configured with.
void Session::snapshot(int64_t step, bool best) {
  SnapshotState state;
  if (store_) {
    state.tokens_seen = trainer_.tokens_seen();
    state.world_size = run_.parallel->world_size();
    state.precision = run_.precision->state();
    state.config_toml = run_.config.to_toml();
    state.config_hash = run_.config.hash();
  }
  state.data_positions = {run_.train_data->position()};  // this rank's: the policy gathers
  finish_background_save(step, /*wait=*/true);
  snapshots_.save(step, best, std::move(state));
}

// checkpoint.async: records a background save that is done, or with `wait` waits for it; a wait
// is said on the console.
std::optional<double> Session::finish_background_save(int64_t step, bool wait) {
  const int64_t writing = snapshots_.last_step();
  const std::optional<double> waited = snapshots_.finish_background_save(wait);
  if (store_ && waited && *waited > 0) {
    console_.line(fmt::format(
        "step {}: waited {:.3f} s for the snapshot of step {} to be written (checkpoint.async)",
        step, *waited, writing));
  }
  return waited;
}

// An error ends the run, but the snapshot being written still goes in place first, so that the
// run resumes from it; if that save fails too, the first error stays the run's.
void Session::finish_background_save_after_error() {
  try {
    snapshots_.finish_background_save(/*wait=*/true);
  } catch (const std::exception& e) {
    if (store_) console_.line(fmt::format("the snapshot being written failed too: {}", e.what()));
  }
}

void Session::print_closing(const SessionOutcome& outcome) {
  console_.line(fmt::format(
      "{} {} of {} steps; {} of training this session | final loss {:.6f}{} | run store {:.1f} "
      "ms ({:.3f}% of step time) | snapshots {:.1f} ms",
      outcome.status, outcome.steps_done, run_.train.steps, format_duration(train_seconds_),
      outcome.final_loss, skipped_updates_note(updates_), store_->seconds_spent() * 1000.0,
      train_seconds_ > 0 ? 100.0 * store_->seconds_spent() / train_seconds_ : 0.0,
      snapshots_.seconds() * 1000.0));
  if (auto warning = mostly_skipped_warning(updates_, name_)) console_.line(*warning);
}

}  // namespace kiln
