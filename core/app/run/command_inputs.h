// What a snapshot command (`kiln eval`, `kiln export`) reads, named for the output guard
// (core/store/runs/output_guard.h): the files a run recorded as its inputs, a task's files, an
// `--hf` folder. An output option may replace none of them: `--details mc.jsonl` would otherwise
// overwrite the items it scores.
#pragma once

#include <string>
#include <vector>

#include "core/data/task_file.h"
#include "core/store/runs/inputs.h"
#include "core/store/runs/output_guard.h"

namespace kiln {

// The files and folders a run's record names (data.train's shards, model.init_from's folder,
// eval.tasks' files), each as "the run's KEY".
std::vector<CommandInput> recorded_inputs(const std::vector<RunInput>& recorded);

// Each task's file, its items and its few-shot pool.
std::vector<CommandInput> task_inputs(const std::vector<Task>& tasks);

// check_output_path for one output file, then its folder made: a path that cannot take a file is
// refused before any scoring. Nothing for "" (none asked).
void prepare_output_file(const std::string& path, const std::string& db, const std::string& option,
                         const std::vector<CommandInput>& reads);

}  // namespace kiln
