// A Hugging Face model directory that Kiln did not train, opened for `kiln eval --hf DIR --task`
// and `kiln sample --hf DIR`: its config.json read as a Kiln model (core/api/hf_config.h),
// its safetensors weights (one file, or shards with their index) loaded into it as
// model.init_from loads them, and its tokenizer.json as the "hf" tokenizer. A score goes to the
// run store as a run named after the directory, holding the model section that was read and the
// directory's fingerprint (config.json, tokenizer.json and every weight file: XXH3 of their
// bytes, as core/util/file_fingerprint.h), so that `kiln runs compare` sets it beside trained
// runs, and the same weights scored again replace their own rows.
#pragma once

#include <memory>
#include <string>

#include "core/app/run/from_snapshot.h"
#include "core/train/assemble.h"

namespace kiln {

class Tokenizer;

struct HfCheckpoint {
  std::string dir;          // absolute
  std::string name;         // the run's name in the store: "hf-" and the folder's name
  std::string fingerprint;  // "hf:" and 16 hex digits, the label of its scores
  AssembledRun run;         // on one process, weights loaded, in eval mode
  std::shared_ptr<Tokenizer> tokenizer;
};

// A UserError "DIR: what: how to fix" for a path that is not such a directory: no config.json,
// a model_type Kiln has no model for or a field value its model does not compute, no weights, no
// tokenizer.json, or weights that do not match config.json.
// `threads`: its CPU threads, as run.threads (0: run.threads's default).
HfCheckpoint open_hf_checkpoint(const std::string& dir, int64_t threads = 0);

// `kiln eval --hf DIR --task FILE`: the tasks scored on request.hf's directory (on.details
// refused first where it would replace a task's file or lie in the directory), recorded in
// request.db (made when missing) under the directory's run (made at the first evaluation;
// a run of that name holding another directory is refused) at step 0, labelled by the
// fingerprint.
TaskReport evaluate_hf_tasks(const SnapshotRequest& request, const TaskEvalOn& on);

}  // namespace kiln
