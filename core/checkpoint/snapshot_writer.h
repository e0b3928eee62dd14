// Writing a snapshot's folder (its layout: core/checkpoint/snapshot.h). Every rank writes the
// parts of the training state it holds into its own files under `<label>.tmp` (from the live
// tensors, or from host copies a background thread writes while training goes on:
// core/checkpoint/background_save.h), each fsync'ed; once every rank's are, rank 0 writes
// state.json and the manifest, last, then renames the folder into place: a crash of any rank
// leaves the whole snapshot or none.
//
// Crash points on the way (core/util/fault.h), in order: snapshot.begun (the folder made, no
// data), snapshot.mid_file (part of a rank's shard written), snapshot.partial (the shard
// written, the rest not), snapshot.unlisted (every file synced, no manifest),
// snapshot.unpublished (not yet renamed), snapshot.published (renamed, not yet in the run
// store).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/api/parallel.h"
#include "core/checkpoint/snapshot_state.h"

namespace torch::optim {
class Optimizer;
}

namespace kiln {

class Model;

// Thrown by write_rank_files and commit_snapshot after a second stop signal
// (StopSignal::abandoned): the user will not wait, so the snapshot being written is removed and the
// earlier ones are left as they were.
class SnapshotAbandoned : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What one rank writes of a snapshot, taken on the training thread between two steps.
struct RankSnapshot {
  int rank = 0;
  std::vector<StateSlice> parts;   // the strategy's parts (live tensors), or their host copies
  std::string optimizer_settings;  // optimizer_<rank>.pt's bytes; empty: this rank writes none
};

// The optimizer's settings (its groups' options) and the non-tensor state (step counts) of the
// parameters whose optimizer state this rank writes from offset 0 (one rank per parameter), as a
// LibTorch archive whose state tensors are empty: their values are in the shards. Empty when this
// rank writes no parameter's state.
std::string optimizer_settings(torch::optim::Optimizer& optimizer,
                               const std::vector<StateSlice>& parts);

// Every rank: its files (state_shard_name(rank), optimizer_<rank>.pt) into `dir/<label>.tmp`,
// each synced; returns their entries of the manifest (file name -> entry). Safe on another thread
// than the training one when `mine` holds host copies.
nlohmann::json write_rank_files(const std::string& dir, const std::string& label,
                                const RankSnapshot& mine);
// Rank 0, once every rank's files are synced: state.json, the manifest listing `files` (every
// rank's entries) and state.json, then the rename into place. On failure the `.tmp` folder goes.
void commit_snapshot(const std::string& dir, const std::string& label, const SnapshotState& state,
                     const nlohmann::json& files);
// The snapshot of one process holding its whole model and optimizer: its files and the commit.
void write_snapshot(const std::string& dir, const std::string& label, Model& model,
                    torch::optim::Optimizer& optimizer, const SnapshotState& state);
// Removes `dir/<label>.tmp`, a snapshot that will not be committed.
void discard_snapshot(const std::string& dir, const std::string& label);

// Deletes the `<label>.tmp` folders that a process killed mid-write left in `dir` (never loaded:
// list_snapshots passes them over); returns their names. Only for the process that holds the
// run's lock, so that none of them is being written.
std::vector<std::string> remove_unfinished_snapshots(const std::string& dir);

// The manifest's XXH3-64 of a file, as 16 hex digits; its size in `bytes_out` when given.
std::string snapshot_file_checksum(const std::string& path, int64_t* bytes_out = nullptr);

}  // namespace kiln
