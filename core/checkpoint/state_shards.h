// The tensors of a snapshot, sharded: each rank writes the parts of the training state it holds
// (ParallelStrategy::state_slices, core/api/parallel.h) into a file of its own, and a load reads,
// for each part a rank holds under its own strategy and world size, only the byte ranges of the
// stored parts that overlap it (so a snapshot written by 2 fsdp ranks loads on 3, or on one).
//
//   shard_<rank>.safetensors   the parts rank <rank> wrote, one safetensors tensor each, named
//                              "<tensor>" for a part at offset 0 in every dim, else
//                              "<tensor>@<offsets, comma-separated>"
//
// The manifest lists, beside each such file's size and XXH3-64, its parts: {"tensor", "dtype",
// "whole", "offsets", "shape", "begin", "end"}, begin and end being the part's bytes in the file
// (row-major, as safetensors lays them out).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/api/parallel.h"

namespace kiln {

std::string state_shard_name(int rank);

// The parts of `slices` this rank writes, copied into host memory kept in `into` between calls:
// its tensors are reused when the parts have the same shapes and dtypes as last time, and pinned
// when the parts live on a GPU (so the copy does not stage through pageable memory).
void copy_to_host(const std::vector<StateSlice>& slices, std::vector<StateSlice>& into);

// Writes the parts of `slices` marked `writes` (on any device) into `path`, synced;
// `after_first_part` runs once, after the first part's bytes went out (a crash point). Returns the
// file's entry in the manifest: {"bytes", "xxh3", "parts"}.
nlohmann::json write_state_shard(const std::string& path, const std::vector<StateSlice>& slices,
                                 const std::function<void()>& after_first_part);

// Every part of `slices` (written by this rank or not) read from the files that `files` (the
// manifest's "files": name -> entry) lists in `dir`, reading only the byte ranges that overlap it.
// A UserError naming the tensors when the snapshot does not hold one whole or holds it in another
// shape (a snapshot of another model). Returns the bytes read.
int64_t read_state_shards(const std::string& dir, const nlohmann::json& files,
                          const std::vector<StateSlice>& slices);

}  // namespace kiln
