// The evaluation tasks of a run (eval.tasks) or of `kiln eval --task`: read and checked before
// anything runs, scored on the model, and turned into the run store's rows and the console's
// lines.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/task_file.h"
#include "core/store/task_scores.h"
#include "core/train/task_scoring.h"

namespace kiln {

struct AssembledRun;
class Tokenizer;

// The task files of `pattern` (a path or glob, eval.tasks), in name order, each read and its
// items checked: a UserError for a pattern that matches nothing, a bad file or item, or a task
// name two files give. `option` names the setting in errors ("eval.tasks", "--task").
std::vector<Task> load_tasks(const std::string& pattern, const std::string& option);

// Tasks scored on `run`'s model; the tokenizer is the run's data's. Collective.
class TaskSuite {
 public:
  TaskSuite(AssembledRun& run, std::vector<Task> tasks);
  bool empty() const { return tasks_.empty(); }
  std::vector<TaskResult> score();

 private:
  AssembledRun& run_;
  std::vector<Task> tasks_;
  std::shared_ptr<Tokenizer> tokenizer_;  // the run's data's; null without tasks
};

// A result's rows: one per metric.
std::vector<TaskScoreRow> task_score_rows(const TaskResult& result, int64_t step,
                                          const std::string& checkpoint);

// "task kjv_cloze: acc 0.412 ± 0.022, acc_norm 0.398 ± 0.022 (500 items, 3 cut to fit)".
std::string task_line(const TaskResult& result);

}  // namespace kiln
