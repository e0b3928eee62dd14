// The snapshot policy: when a run snapshots, which validation loss earns a best snapshot, and
// what taking or loading one involves (the parallel strategy's gather and shard around it, the
// files, the run store's rows, pruning to checkpoint.keep). The session's loop asks it, as
// torchtitan's train loop asks its CheckpointManager, and keeps none of this state itself.
// Every rank holds one and writes the parts of the training state it holds (nothing is
// gathered); rank 0, the one given a store, commits the snapshot once every rank's files are
// synced, and writes the rows. With checkpoint.async, each rank copies its parts into host
// buffers and a background thread writes them and commits (background_save.h); the snapshot's
// row and the pruning follow on the training thread once it is in place.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/background_save.h"
#include "core/checkpoint/snapshot_catalog.h"
#include "core/config/options.h"
#include "core/store/runs/paths.h"

namespace torch::optim {
class Optimizer;
}

namespace kiln {

class Model;
class ParallelStrategy;
class Connection;
class RunStore;
struct RunRecord;

// What makes a snapshot the run's own (core/checkpoint/snapshot_catalog.h), as the store `db`
// records it (read only); `session_hash`: the config hash this session runs with, which its
// snapshots will carry.
SnapshotOwner snapshot_owner(Connection& db, const RunRecord& run, const std::string& session_hash);

// What a snapshot is taken of and loaded into.
struct SnapshotParts {
  Model& model;
  torch::optim::Optimizer& optimizer;
  ParallelStrategy& parallel;
};

class SnapshotPolicy {
 public:
  // `total_steps`: train.steps, whose step always snapshots when checkpoint.every > 0.
  // `owner`: whose snapshots are written and pruned. `store`: null on ranks other than 0.
  SnapshotPolicy(const CheckpointOptions& options, int64_t total_steps, SnapshotParts parts,
                 RunPaths paths, SnapshotOwner owner, RunStore* store, int64_t run_id);

  // Loads `snapshot` into the model and optimizer (each rank reading only its part), takes up
  // its step and best validation loss, and returns its state for the rest of the run. Collective.
  SnapshotState restore(const SnapshotRef& snapshot);

  // Save now? After every checkpoint.every-th step and the last one (never when it is 0), and
  // after the step at which the run was interrupted, whatever checkpoint.every says.
  bool due(int64_t step, bool interrupted) const;
  // Records a validation loss; true when it beats every earlier one and snapshots are on
  // (checkpoint.every > 0), so a best snapshot is due.
  bool best_due(double val_loss);

  // Writes the regular (or best) snapshot of `step` from `run_state` (tokens, precision, config:
  // read on rank 0 only; and on every rank, this rank's data position as the one entry of
  // data_positions; the step and best loss are the policy's), records it in the store and
  // prunes older ones. Collective: every rank writes its parts, and its RNG states and data
  // position go to rank 0.
  // With checkpoint.async it first waits for the save in flight, and returns once this one is
  // under way: finish_background_save records it.
  void save(int64_t step, bool best, SnapshotState run_state);

  // checkpoint.async, rank 0: when the background save has put its snapshot in place (or, when
  // `wait`, once it has), records it in the store and prunes; rethrows the save's error. Returns
  // the seconds waited, or nothing when no save was in flight. The session asks at each step, at
  // a snapshot step with `wait`, and before the run ends however it ends.
  std::optional<double> finish_background_save(bool wait);

  // The bytes of tensors each rank read in restore(), by rank (rank 0: every rank's; the others:
  // their own); empty before a restore.
  const std::vector<int64_t>& bytes_read() const { return bytes_read_; }
  // The step of the latest snapshot, this session's or the one resumed from; 0 when none.
  int64_t last_step() const { return last_step_; }
  // Wall time the training thread spent on snapshots this session: in save(), and waiting for
  // a background save.
  double seconds() const { return seconds_; }

 private:
  void gather_rank_states(SnapshotState& state);
  void write_and_commit(const RankSnapshot& mine, const SnapshotState& state,
                        const std::string& label, const std::string& key);
  void record(int64_t step, const std::string& label);

  CheckpointOptions options_;
  int64_t total_steps_;
  SnapshotParts parts_;
  RunPaths paths_;
  SnapshotOwner owner_;
  RunStore* store_;
  int64_t run_id_;
  std::optional<double> best_val_;
  int64_t last_step_ = 0;
  double seconds_ = 0;
  int64_t saves_ = 0;  // snapshots taken this session: each exchange of file lists has its key
  std::vector<int64_t> bytes_read_;
  std::unique_ptr<BackgroundSave> background_;  // with checkpoint.async
  std::vector<StateSlice> host_parts_;          // what background_ writes from, kept
  SnapshotRef in_flight_;                       // what background_ writes, when it does
  int64_t step_before_in_flight_ = 0;  // the latest snapshot's step, should that save not land
};

}  // namespace kiln
