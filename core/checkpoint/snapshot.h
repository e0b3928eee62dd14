// Snapshots: everything a run needs to continue exactly where it stopped.
//
//   <run's folder>/snapshots/step_000300/   the regular ones (the latest checkpoint.keep)
//                            best_000200/   the best by validation loss, when eval is on
//       model.pt       parameters and buffers (LibTorch archive)
//       optimizer.pt   optimizer state (moments, step counts)
//       state.json     step, tokens seen, every rank's data position and RNG states, precision
//                      state, the resolved config and its hash
//       manifest.json  the run (uuid) and config hash the snapshot belongs to, and the size and
//                      XXH3-64 checksum of each file above; written last
//
// The functions below take the snapshots folder as `dir`: RunPaths::snapshots()
// (core/store/runs/paths.h) names it. Which snapshots are a run's own, and which one a command
// loads: core/checkpoint/snapshot_catalog.h.
//
// A snapshot is written under a temporary name, each file fsync'ed, then renamed into place, so a
// crash leaves either the whole snapshot or none (core/checkpoint/snapshot_writer.h). Loading
// checks the manifest; a snapshot that fails the check is reported and the previous good one is
// used instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/snapshot_state.h"
#include "core/checkpoint/snapshot_writer.h"

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

std::string regular_label(int64_t step);
std::string best_label(int64_t step);

// Every complete (renamed into place) snapshot in `dir`, whoever's (which are a run's own:
// snapshot_catalog.h); sorted by step, oldest first.
std::vector<SnapshotRef> list_snapshots(const std::string& dir);

// Checks the manifest; a UserError saying what is wrong when the snapshot is damaged.
void verify_snapshot(const SnapshotRef& snapshot);

// Loads tensors into `model` (and `optimizer` when given) and returns the state; when
// `restore_rng`, restores rank `rank`'s RNG states, or rank 0's when the snapshot holds fewer
// ranks' (RNG streams cannot be split or merged across world sizes). The snapshot must have
// been verified.
SnapshotState load_snapshot(const SnapshotRef& snapshot, Model& model,
                            torch::optim::Optimizer* optimizer, bool restore_rng, int rank = 0);

}  // namespace kiln
