// The evaluation tasks of a run (eval.tasks) or of `kiln eval --task`: read and checked before
// anything runs, scored on the model, and turned into the run store's rows and the console's
// lines.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/task_file.h"
#include "core/store/runs/task_scores.h"
#include "core/train/task_scoring.h"

namespace kiln {

struct AssembledRun;
class Tokenizer;

// The task files of `pattern` (a path or glob, eval.tasks), in name order, each read and its
// items checked: a UserError for a pattern that matches nothing, a bad file or item, or a task
// name two files give. `option` names the setting in errors ("eval.tasks", "--task").
std::vector<Task> load_tasks(const std::string& pattern, const std::string& option);

// A run's tasks, prepared for its model (each request encoded with the run's data's tokenizer
// and cut to the model's context, so that a request it cannot read is refused before any step)
// and scored on it when asked.
class TaskSuite {
 public:
  TaskSuite(std::vector<Task> tasks, std::shared_ptr<Tokenizer> tokenizer, int64_t context_length,
            int64_t vocab_size);
  // Collective (every rank of the run asks).
  std::vector<TaskResult> score(AssembledRun& run, const TaskScoring& scoring) const;

 private:
  std::vector<PreparedTask> tasks_;
  std::shared_ptr<Tokenizer> tokenizer_;
};

// A result's rows: one per metric.
std::vector<TaskScoreRow> task_score_rows(const TaskResult& result, int64_t step,
                                          const std::string& checkpoint);

// "task kjv_cloze: acc 0.412 ± 0.022, acc_norm 0.398 ± 0.022 (500 items, 3 cut to fit)".
std::string task_line(const TaskResult& result);

}  // namespace kiln
