// Writing a snapshot's folder (its layout: core/checkpoint/snapshot.h), from the live model and
// optimizer or from their archives serialized beforehand, which a background thread can write
// while training changes the tensors (checkpoint.async: core/checkpoint/background_save.h).
// Either way the files go under `<label>.tmp`, each is fsync'ed, the manifest comes last, then
// the folder is renamed into place: a crash leaves the whole snapshot or none.
//
// Crash points on the way (core/util/fault.h), in order: snapshot.begun (the folder made, no
// data), snapshot.mid_file (part of model.pt written), snapshot.partial (model.pt written, the
// rest not), snapshot.unlisted (every file synced, no manifest), snapshot.unpublished (not yet
// renamed), snapshot.published (renamed, not yet in the run store).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/checkpoint/snapshot_state.h"

namespace torch::optim {
class Optimizer;
}

namespace kiln {

class Model;

// Thrown by write_snapshot after a second stop signal (StopSignal::abandoned): the user will not
// wait, so the snapshot being written is removed and the earlier ones are left as they were.
class SnapshotAbandoned : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// model.pt's and optimizer.pt's bytes, as write_snapshot would write them. Kept between saves:
// serializing again reuses the buffers' memory.
struct SnapshotArchives {
  std::string model;
  std::string optimizer;
};

// Serializes `model` and `optimizer` into `into` (the copy of the training state a background
// save writes from).
void serialize_snapshot(const Model& model, const torch::optim::Optimizer& optimizer,
                        SnapshotArchives& into);

// Writes model, optimizer and `state` as `dir/label`, streaming the archives to the files.
void write_snapshot(const std::string& dir, const std::string& label, const Model& model,
                    const torch::optim::Optimizer& optimizer, const SnapshotState& state);
// The same from archives serialize_snapshot made; safe on another thread than the training one.
void write_snapshot(const std::string& dir, const std::string& label,
                    const SnapshotArchives& archives, const SnapshotState& state);

// Deletes the `<label>.tmp` folders that a process killed mid-write left in `dir` (never loaded:
// list_snapshots passes them over); returns their names. Only for the process that holds the
// run's lock, so that none of them is being written.
std::vector<std::string> remove_unfinished_snapshots(const std::string& dir);

// The manifest's XXH3-64 of a file, as 16 hex digits; its size in `bytes_out` when given.
std::string snapshot_file_checksum(const std::string& path, int64_t* bytes_out = nullptr);

}  // namespace kiln
