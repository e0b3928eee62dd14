// The non-tensor part of a snapshot, as its state.json holds it: step, tokens seen, every rank's
// data position and RNG states, the precision policy's state and the resolved config. Apart from
// snapshot.h, which includes it, so that state.json's layout and the RNG states (LibTorch's
// generator states as hex strings) read on their own, away from the writing and checking of files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/api/data_position.h"

namespace kiln {

// The non-tensor part of a snapshot.
struct SnapshotState {
  int64_t step = 0;
  int64_t tokens_seen = 0;
  int64_t world_size = 1;
  std::vector<LoaderPosition> data_positions;  // indexed by rank
  // Each rank's capture_rng_states(), indexed by rank. Written empty: this process's alone. Read
  // from a snapshot older than per-rank states: the one state it holds (rank 0's).
  nlohmann::json rng_by_rank = nlohmann::json::array();
  std::optional<double> best_val_loss;
  nlohmann::json precision = nlohmann::json::object();  // the precision policy's own state
  std::string config_toml;
  std::string config_hash;
  std::string run_uuid;  // the run the snapshot belongs to: its manifest names it
};

// This process's RNG states (CPU, and each CUDA device's), as state.json holds them.
nlohmann::json capture_rng_states();

// Sets this process's RNG states to `states`, one of capture_rng_states(); generators beyond
// those it holds are left as they are.
void restore_rng(const nlohmann::json& states);

// state.json's fields; an empty rng_by_rank is written as this process's states alone.
nlohmann::json state_to_json(const SnapshotState& s);
// A state.json read back (nlohmann::json exceptions for a missing or mistyped field); one written
// before per-rank RNG states gives its one state as rank 0's.
SnapshotState state_from_json(const nlohmann::json& j);

}  // namespace kiln
