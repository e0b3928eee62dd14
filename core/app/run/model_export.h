// `kiln export`: a run's snapshot written in its model's interchange format, for other tools to
// load: one .safetensors file, a Hugging Face model directory (config.json, the weights, the
// tokenizer of the run's data), or an adapter run's adapter as PEFT's folder. Kept apart from
// core/app/run/from_snapshot.cpp, which evaluates snapshots, because an export writes files
// another library reads and guards the folder it replaces.
#pragma once

#include <cstdint>
#include <string>

#include "core/app/run/from_snapshot.h"  // SnapshotRequest

namespace kiln {

// Whether `kiln export -o out_path` writes a Hugging Face model directory (model.safetensors and
// config.json in it) rather than one file: any path not ending in ".safetensors".
bool exports_directory(const std::string& out_path);

struct ExportOptions {
  // > 0 (--max-shard-size): a directory's weights in shards of at most that many bytes, with
  // model.safetensors.index.json (write_hf_directory); 0: one file.
  int64_t max_shard_bytes = 0;
  // --force: export into a folder that holds files of its own, replacing those an export writes.
  bool force = false;
  // --merge: an adapter run's model with its adapter folded in (core/api/adapter.h), written as
  // any model is; without it, such a run exports PEFT's adapter folder.
  bool merge = false;
};

// Writes the model's weights in its interchange format: a .safetensors file, or a directory
// (exports_directory) for a model with a Hugging Face config; an adapter run's adapter as PEFT's
// folder (adapter_config.json, adapter_model.safetensors) unless `options.merge`. Returns the
// tensor count.
// A directory is replaced as one step (replace_folder): files a model directory holds
// (is_model_directory_file) go, the folder's other files stay. A folder holding files that are
// not a previous Kiln export (a user's own config.json) is refused unless `options.force`.
int64_t export_snapshot(const SnapshotRequest& request, const std::string& out_path,
                        const ExportOptions& options = {});

}  // namespace kiln
