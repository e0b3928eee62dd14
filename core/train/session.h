// A training session: the loop around a Trainer for one `kiln run` or `kiln resume`, from the
// step after the one it starts from to train.steps or a stop signal. It records metrics and evals
// in the run store, prints the console lines, handles non-finite steps (as
// core/train/skipped_updates.h says) and reports the optimizer state's size; after each step it
// asks EvalPolicy "evaluate now?" and "score the tasks now?", and SnapshotPolicy "save now?" /
// "best so far?", which own those decisions and their state. Every rank runs a session (the evals
// and snapshots are collective); only rank 0, the one given a store, prints, records and writes
// snapshots.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/checkpoint/snapshot_policy.h"
#include "core/store/runs/paths.h"
#include "core/store/runs/writer.h"
#include "core/train/console.h"
#include "core/train/eval_policy.h"
#include "core/train/session_outcome.h"
#include "core/train/step_row.h"
#include "core/train/trainer.h"

namespace kiln {

class TensorBoardLog;

class Session {
 public:
  // `paths` and `owner`: the run's folder and what makes a snapshot in it the run's own.
  // `store`: null on ranks other than 0; `run_id`: the run's row, already in the store.
  Session(AssembledRun& run, RunPaths paths, SnapshotOwner owner, RunStore* store, int64_t run_id);

  Console& console() { return console_; }
  // Continues after `snapshot`: weights, optimizer, data position, RNG, counters. Collective.
  void restore(const SnapshotRef& snapshot);
  // Rank 0: the run, model, data and batch, and the legend of the step lines.
  void print_header();
  // Stop after `step` (above the one the session starts after, below train.steps: the caller
  // checks), evaluated and snapshotted as a last step is, with the schedule still planned over
  // train.steps: the run is paused there (`kiln run|resume --until`), and a resume continues as
  // if it had not stopped.
  void pause_after(int64_t step);
  // Trains to train.steps, the pause step or a stop signal, then closes the run's row:
  // completed, interrupted (also when paused), or failed with the error (which is rethrown, a
  // LibTorch one as std::runtime_error).
  SessionOutcome train();
  // After train() paused at pause_after's step S, or after a restore of the step-S snapshot (the
  // caller checked the branch: a val split, a wsd schedule): the cooldown branch of `steps` steps
  // (core/train/cooldown_probe.h), evaluated on the val split and recorded on rank 0 as the run's
  // probe at S (core/store/runs/rung_probes.h; +inf when it diverged). Nothing is recorded when a
  // stop signal ends it early. The run's row and snapshots stay as they were.
  void probe_cooldown(int64_t steps);

 private:
  std::unique_ptr<TensorBoardLog> open_tensorboard();
  void train_steps(SessionOutcome& outcome);
  void print_step(const StepStats& stats);
  void evaluate(int64_t step);
  void score_tasks(int64_t step);
  void test_at_end(int64_t step);
  void snapshot(int64_t step, bool best);
  std::optional<double> finish_background_save(int64_t step, bool wait);
  void finish_background_save_after_error();
  void say_abandoned();
  void print_closing(const SessionOutcome& outcome);

  AssembledRun& run_;
  RunStore* store_;  // null on ranks other than 0
  int64_t run_id_;
  std::string name_;
  std::string folder_;  // the run's folder (RunPaths), named in the header
  Trainer trainer_;
  Console console_;
  EvalPolicy evals_;
  SnapshotPolicy snapshots_;
  int64_t start_step_ = 0;    // the step this session starts after: 0, or the snapshot's
  int64_t pause_at_ = 0;      // pause_after's step; 0: none
  double train_seconds_ = 0;  // in train_step, this session
  UpdateCount updates_;       // the run's steps and skipped updates, counted once it stops
};

}  // namespace kiln
