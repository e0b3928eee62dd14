// Snapshots: everything a run needs to continue exactly where it stopped.
//
//   <run.out_dir>/<run name>/snapshots/step_000300/   the regular ones (the latest checkpoint.keep)
//                                      best_000200/   the best by validation loss, when eval is on
//       model.pt       parameters and buffers (LibTorch archive)
//       optimizer.pt   optimizer state (moments, step counts)
//       state.json     step, tokens seen, every rank's data position, RNG states, precision
//                      state, the resolved config and its hash
//       manifest.json  size and XXH3-64 checksum of each file above, written last
//
// The functions below take the snapshots folder as `dir`: RunPaths::snapshots()
// (core/store/run_paths.h) names it.
//
// A snapshot is written under a temporary name, each file fsync'ed, then renamed into place, so a
// crash leaves either the whole snapshot or none. Loading checks the manifest; a snapshot that
// fails the check is reported and the previous good one is used instead.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/api/data_position.h"

namespace torch::optim {
class Optimizer;
}

namespace kiln {

class Model;

struct SnapshotRef {
  std::string path;
  std::string label;  // step_000300 | best_000200
  int64_t step = 0;
  bool best = false;
};

// The non-tensor part of a snapshot.
struct SnapshotState {
  int64_t step = 0;
  int64_t tokens_seen = 0;
  int64_t world_size = 1;
  std::vector<LoaderPosition> data_positions;  // indexed by rank
  std::optional<double> best_val_loss;
  nlohmann::json precision = nlohmann::json::object();  // the precision policy's own state
  std::string config_toml;
  std::string config_hash;
};

std::string regular_label(int64_t step);
std::string best_label(int64_t step);

// Sorted by step, oldest first; only complete (renamed into place) snapshots.
std::vector<SnapshotRef> list_snapshots(const std::string& dir);

// Writes model, optimizer, the process's RNG states and `state` as `dir/label`.
void write_snapshot(const std::string& dir, const std::string& label, const Model& model,
                    const torch::optim::Optimizer& optimizer, const SnapshotState& state);

// Checks the manifest; a UserError saying what is wrong when the snapshot is damaged.
void verify_snapshot(const SnapshotRef& snapshot);

// Picks a snapshot by "latest", "best" or a step number; for "latest", damaged snapshots are
// reported through `warn` and skipped. A UserError when none qualifies.
SnapshotRef select_snapshot(const std::string& dir, const std::string& which,
                            const std::function<void(const std::string&)>& warn);

// Loads tensors into `model` (and `optimizer` when given) and returns the state; restores the
// RNG states when `restore_rng`. The snapshot must have been verified.
SnapshotState load_snapshot(const SnapshotRef& snapshot, Model& model,
                            torch::optim::Optimizer* optimizer, bool restore_rng);

// Deletes all but the newest `keep` regular snapshots and all but the newest best one.
std::vector<SnapshotRef> prune_snapshots(const std::string& dir, int64_t keep);

}  // namespace kiln
