// Snapshots: everything a run needs to continue exactly where it stopped.
//
//   <run's folder>/snapshots/step_000300/   the regular ones (the latest checkpoint.keep)
//                            best_000200/   the best by validation loss, when eval is on
//       shard_<r>.safetensors  the parts of the parameters, buffers and optimizer state that rank
//                      r holds and writes (core/checkpoint/state_shards.h)
//       optimizer_<r>.pt  the optimizer's settings and step counts of the parameters whose state
//                      rank r writes (LibTorch archive, state tensors empty)
//       state.json     step, tokens seen, every rank's data position and RNG states, precision
//                      state, the resolved config and its hash
//       manifest.json  the run (uuid) and config hash the snapshot belongs to, and the size and
//                      XXH3-64 checksum of each file above (of a shard: the parts it holds);
//                      written last
//   A snapshot by an older Kiln ("format": 1) holds model.pt and optimizer.pt, whole LibTorch
//   archives, instead of the shards and optimizer_<r>.pt: it loads whole on every rank.
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
class ParallelStrategy;

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
// `restore_rng`, restores this rank's RNG states, or rank 0's when the snapshot holds fewer
// ranks' (RNG streams cannot be split or merged across world sizes). `parallel` (null: one
// process holding whole tensors) says which parts this rank holds: it reads only those bytes,
// counted into `bytes_read` when given. Collective when `parallel` is given. The snapshot must
// have been verified.
SnapshotState load_snapshot(const SnapshotRef& snapshot, Model& model,
                            torch::optim::Optimizer* optimizer, bool restore_rng,
                            ParallelStrategy* parallel = nullptr, int64_t* bytes_read = nullptr);

}  // namespace kiln
